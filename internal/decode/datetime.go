package decode

import (
	"math"
	"strconv"
)

const (
	postgresEpochJDate = 2451545 // date2j(2000, 1, 1)
	usecsPerDay        = int64(86400000000)
	usecsPerHour       = int64(3600000000)
	usecsPerMinute     = int64(60000000)
	usecsPerSec        = int64(1000000)
)

// j2date is PostgreSQL's j2date: Julian day to proleptic Gregorian date.
func j2date(jd int) (year, month, day int) {
	julian := uint32(jd) + 32044
	quad := julian / 146097
	extra := (julian-quad*146097)*4 + 3
	julian += 60 + quad*3 + extra/146097
	quad = julian / 1461
	julian -= quad * 1461
	y := int(julian * 4 / 1461)
	if y != 0 {
		julian = (julian+305)%365 + 123
	} else {
		julian = (julian+306)%366 + 123
	}
	y += int(quad) * 4
	year = y - 4800
	q := julian * 2141 / 65536
	day = int(julian - 7834*q/256)
	month = int((q+10)%12 + 1)
	return
}

// appendYMD prints ISO y-m-d; BC years (year <= 0) print as 1-year and the
// caller appends " BC".
func appendYMD(dst []byte, year, month, day int) []byte {
	if year <= 0 {
		year = 1 - year
	}
	dst = appendPad(dst, int64(year), 4)
	dst = append(dst, '-')
	dst = appendPad(dst, int64(month), 2)
	dst = append(dst, '-')
	return appendPad(dst, int64(day), 2)
}

func appendPad(dst []byte, v int64, width int) []byte {
	var buf [24]byte
	s := strconv.AppendInt(buf[:0], v, 10)
	for i := len(s); i < width; i++ {
		dst = append(dst, '0')
	}
	return append(dst, s...)
}

// appendDate is date_out with DateStyle ISO.
func appendDate(dst []byte, d int32) []byte {
	switch d {
	case math.MinInt32:
		return append(dst, "-infinity"...)
	case math.MaxInt32:
		return append(dst, "infinity"...)
	}
	y, m, day := j2date(int(d) + postgresEpochJDate)
	dst = appendYMD(dst, y, m, day)
	if y <= 0 {
		dst = append(dst, " BC"...)
	}
	return dst
}

// appendSeconds prints ss[.ffffff] with trailing fraction zeros dropped.
func appendSeconds(dst []byte, sec, fsec int64) []byte {
	dst = appendPad(dst, abs64(sec), 2)
	if fsec == 0 {
		return dst
	}
	f := abs64(fsec)
	digits := 6
	for f%10 == 0 {
		f /= 10
		digits--
	}
	dst = append(dst, '.')
	return appendPad(dst, f, digits)
}

func abs64(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// appendHMS prints hh:mm:ss[.ffffff] of usec microseconds into the day.
func appendHMS(dst []byte, usec int64) []byte {
	h := usec / usecsPerHour
	usec -= h * usecsPerHour
	m := usec / usecsPerMinute
	usec -= m * usecsPerMinute
	s := usec / usecsPerSec
	dst = appendPad(dst, h, 2)
	dst = append(dst, ':')
	dst = appendPad(dst, m, 2)
	dst = append(dst, ':')
	return appendSeconds(dst, s, usec-s*usecsPerSec)
}

// appendTime is time_out.
func appendTime(dst []byte, t int64) []byte { return appendHMS(dst, t) }

// appendTimezone is EncodeTimezone: tz is seconds west of UTC.
func appendTimezone(dst []byte, tz int32) []byte {
	sec := abs64(int64(tz))
	if tz <= 0 {
		dst = append(dst, '+')
	} else {
		dst = append(dst, '-')
	}
	h, m, s := sec/3600, sec/60%60, sec%60
	dst = appendPad(dst, h, 2)
	if m != 0 || s != 0 {
		dst = append(dst, ':')
		dst = appendPad(dst, m, 2)
	}
	if s != 0 {
		dst = append(dst, ':')
		dst = appendPad(dst, s, 2)
	}
	return dst
}

// appendTimestamp is timestamp_out / timestamptz_out with DateStyle ISO and
// TimeZone UTC.
func appendTimestamp(dst []byte, ts int64, withTZ bool) []byte {
	switch ts {
	case math.MinInt64:
		return append(dst, "-infinity"...)
	case math.MaxInt64:
		return append(dst, "infinity"...)
	}
	date := ts / usecsPerDay
	t := ts - date*usecsPerDay
	if t < 0 {
		t += usecsPerDay
		date--
	}
	y, m, d := j2date(int(date + postgresEpochJDate))
	dst = appendYMD(dst, y, m, d)
	dst = append(dst, ' ')
	dst = appendHMS(dst, t)
	if withTZ {
		dst = append(dst, "+00"...)
	}
	if y <= 0 {
		dst = append(dst, " BC"...)
	}
	return dst
}

// appendInterval is interval_out with IntervalStyle postgres.
func appendInterval(dst []byte, t int64, days, months int32) []byte {
	year, mon := int64(months/12), int64(months%12)
	hour := t / usecsPerHour
	t -= hour * usecsPerHour
	min := t / usecsPerMinute
	t -= min * usecsPerMinute
	sec := t / usecsPerSec
	fsec := t - sec*usecsPerSec

	isZero, isBefore := true, false
	part := func(v int64, unit string) {
		if v == 0 {
			return
		}
		if !isZero {
			dst = append(dst, ' ')
		}
		if isBefore && v > 0 {
			dst = append(dst, '+')
		}
		dst = strconv.AppendInt(dst, v, 10)
		dst = append(dst, ' ')
		dst = append(dst, unit...)
		if v != 1 {
			dst = append(dst, 's')
		}
		isBefore = v < 0
		isZero = false
	}
	part(year, "year")
	part(mon, "mon")
	part(int64(days), "day")
	if isZero || hour != 0 || min != 0 || sec != 0 || fsec != 0 {
		minus := hour < 0 || min < 0 || sec < 0 || fsec < 0
		if !isZero {
			dst = append(dst, ' ')
		}
		if minus {
			dst = append(dst, '-')
		} else if isBefore {
			dst = append(dst, '+')
		}
		dst = appendPad(dst, uabs(hour), 2)
		dst = append(dst, ':')
		dst = appendPad(dst, abs64(min), 2)
		dst = append(dst, ':')
		dst = appendSeconds(dst, sec, fsec)
	}
	return dst
}

// uabs is |v| for hours, which can be as large as |INT64_MIN|/3600e6: fine
// in int64.
func uabs(v int64) int64 { return abs64(v) }
