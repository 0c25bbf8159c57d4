package rowmodel

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"time"
)

// Journal appends messages as JSON lines to a file, fsynced per Append, so
// a process that is SIGKILLed keeps every batch it acknowledged and a test
// can replay the file into a Model. Values keep their Go types through a
// tagged encoding (plain JSON would turn []byte, time.Time and json.Number
// into look-alike strings).
type Journal struct {
	f    *os.File
	path string
	buf  bytes.Buffer
}

// OpenJournal opens (creating or appending to) the journal at path.
func OpenJournal(path string) (*Journal, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening journal %s: %w", path, err)
	}
	return &Journal{f: f, path: path}, nil
}

// journalLine is one message on disk.
type journalLine struct {
	Meta    map[string]string `json:"meta"`
	Payload json.RawMessage   `json:"payload"`
}

// Append writes msgs, one line each, and fsyncs.
func (j *Journal) Append(msgs []Message) error {
	j.buf.Reset()
	for _, msg := range msgs {
		line, err := EncodeJournalLine(msg)
		if err != nil {
			return fmt.Errorf("journal %s: %w", j.path, err)
		}
		j.buf.Write(line)
		j.buf.WriteByte('\n')
	}
	if _, err := j.f.Write(j.buf.Bytes()); err != nil {
		return fmt.Errorf("writing journal %s: %w", j.path, err)
	}
	if err := j.f.Sync(); err != nil {
		return fmt.Errorf("syncing journal %s: %w", j.path, err)
	}
	return nil
}

// Close closes the file.
func (j *Journal) Close() error { return j.f.Close() }

// ReadJournal reads every complete line of a journal. A last line without
// its newline (the writer died mid-write) is ignored; any other bad line is
// an error.
func ReadJournal(path string) ([]Message, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("opening journal %s: %w", path, err)
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	var out []Message
	for lineNo := 1; ; lineNo++ {
		line, err := r.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			return out, nil // torn or empty tail
		}
		if err != nil {
			return nil, fmt.Errorf("reading journal %s: %w", path, err)
		}
		msg, err := DecodeJournalLine(line)
		if err != nil {
			return nil, fmt.Errorf("journal %s line %d: %w", path, lineNo, err)
		}
		out = append(out, msg)
	}
}

// EncodeJournalLine encodes one message (without the newline).
func EncodeJournalLine(msg Message) ([]byte, error) {
	payload, err := json.Marshal(encodeValue(anyMap(msg.Payload)))
	if err != nil {
		return nil, err
	}
	return json.Marshal(journalLine{Meta: msg.Meta, Payload: payload})
}

func anyMap(m map[string]any) any {
	if m == nil {
		return nil
	}
	return m
}

// DecodeJournalLine decodes one line written by EncodeJournalLine.
func DecodeJournalLine(line []byte) (Message, error) {
	var jl journalLine
	if err := json.Unmarshal(line, &jl); err != nil {
		return Message{}, err
	}
	msg := Message{Meta: jl.Meta}
	if len(jl.Payload) == 0 || string(jl.Payload) == "null" {
		return msg, nil
	}
	var raw any
	dec := json.NewDecoder(bytes.NewReader(jl.Payload))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil {
		return Message{}, fmt.Errorf("payload: %w", err)
	}
	v, err := decodeValue(raw)
	if err != nil {
		return Message{}, fmt.Errorf("payload: %w", err)
	}
	p, ok := v.(map[string]any)
	if !ok {
		return Message{}, fmt.Errorf("payload: want an object, got %T", v)
	}
	msg.Payload = p
	return msg, nil
}

// Tagged values: [tag, value]. Maps and lists nest.
const (
	tagString = "s"
	tagInt    = "i"
	tagFloat  = "f"
	tagNumber = "n"
	tagBool   = "b"
	tagBytes  = "x"
	tagTime   = "t"
	tagList   = "a"
	tagMap    = "m"
)

func encodeValue(v any) any {
	switch x := v.(type) {
	case nil:
		return nil
	case string:
		return []any{tagString, x}
	case bool:
		return []any{tagBool, x}
	case int64:
		return []any{tagInt, strconv.FormatInt(x, 10)}
	case int:
		return []any{tagInt, strconv.Itoa(x)}
	case float64:
		return []any{tagFloat, strconv.FormatFloat(x, 'g', -1, 64)}
	case json.Number:
		return []any{tagNumber, string(x)}
	case []byte:
		return []any{tagBytes, base64.StdEncoding.EncodeToString(x)}
	case time.Time:
		return []any{tagTime, x.Format(time.RFC3339Nano)}
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = encodeValue(e)
		}
		return []any{tagList, out}
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		out := make(map[string]any, len(x))
		for _, k := range keys {
			out[k] = encodeValue(x[k])
		}
		return []any{tagMap, out}
	}
	// Anything else keeps its JSON form as a string: visible, never lost.
	b, _ := json.Marshal(v)
	return []any{tagString, string(b)}
}

func decodeValue(raw any) (any, error) {
	if raw == nil {
		return nil, nil
	}
	pair, ok := raw.([]any)
	if !ok || len(pair) != 2 {
		return nil, fmt.Errorf("want a [tag, value] pair, got %v", raw)
	}
	tag, _ := pair[0].(string)
	str, isStr := pair[1].(string)
	switch tag {
	case tagString, tagInt, tagFloat, tagNumber, tagBytes, tagTime:
		if !isStr {
			return nil, fmt.Errorf("tag %q: want a string, got %T", tag, pair[1])
		}
	}
	switch tag {
	case tagString:
		return str, nil
	case tagInt:
		return strconv.ParseInt(str, 10, 64)
	case tagFloat:
		return strconv.ParseFloat(str, 64)
	case tagNumber:
		return json.Number(str), nil
	case tagBytes:
		return base64.StdEncoding.DecodeString(str)
	case tagTime:
		t, err := time.Parse(time.RFC3339Nano, str)
		return t.UTC(), err
	case tagBool:
		b, ok := pair[1].(bool)
		if !ok {
			return nil, fmt.Errorf("tag b: want a bool, got %T", pair[1])
		}
		return b, nil
	case tagList:
		list, ok := pair[1].([]any)
		if !ok {
			return nil, fmt.Errorf("tag a: want a list, got %T", pair[1])
		}
		out := make([]any, len(list))
		for i, e := range list {
			v, err := decodeValue(e)
			if err != nil {
				return nil, err
			}
			out[i] = v
		}
		return out, nil
	case tagMap:
		obj, ok := pair[1].(map[string]any)
		if !ok {
			return nil, fmt.Errorf("tag m: want an object, got %T", pair[1])
		}
		out := make(map[string]any, len(obj))
		for k, e := range obj {
			v, err := decodeValue(e)
			if err != nil {
				return nil, err
			}
			out[k] = v
		}
		return out, nil
	}
	return nil, fmt.Errorf("unknown tag %q", tag)
}
