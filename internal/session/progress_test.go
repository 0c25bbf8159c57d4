package session

import (
	"testing"
	"time"

	"github.com/walshadow/walshadow/internal/wal"
)

func TestDecideProgress(t *testing.T) {
	const seg = 16 << 20
	t0 := time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC)
	saved := Manifest{Received: 3*seg + 100, Delivered: 3*seg + 50, Floor: 3*seg + 40, Restart: 3 * seg}
	base := progressIn{now: t0.Add(200 * time.Millisecond), saved: saved, savedAt: t0, segSize: seg,
		received: 3*seg + 900, spooled: 3*seg + 800, filteredDurable: 3 * seg, apply: 3*seg + 700,
		floor: 3*seg + 60, delivered: 3*seg + 50, deliveredThrough: 3*seg + 50, retention: 256 << 20}

	cases := []struct {
		name  string
		edit  func(in *progressIn)
		check func(t *testing.T, out progressOut)
	}{
		{"the floor moved inside a segment, just saved: not yet persisted", nil, func(t *testing.T, out progressOut) {
			if out.write || out.restartMoved {
				t.Fatalf("write %v restartMoved %v", out.write, out.restartMoved)
			}
			// delivered: the slot may release the stored floor only.
			if out.slotFlush != saved.Floor || out.slotApply != saved.Floor || out.slotWrite != 3*seg+900 {
				t.Fatalf("slot positions %s %s %s", out.slotWrite, out.slotFlush, out.slotApply)
			}
		}},
		{"the floor moved, a second after the last save: persisted", func(in *progressIn) { in.now = t0.Add(time.Second) }, func(t *testing.T, out progressOut) {
			if !out.write || out.manifest.Floor != 3*seg+60 || out.slotFlush != 3*seg+60 || !out.manifest.UpdatedAt.Equal(t0.Add(time.Second)) {
				t.Fatalf("%+v", out)
			}
		}},
		{"delivered moved: persisted at once", func(in *progressIn) { in.delivered = 3*seg + 500 }, func(t *testing.T, out progressOut) {
			if !out.write || out.manifest.Delivered != 3*seg+500 {
				t.Fatalf("%+v", out)
			}
		}},
		{"nothing delivered but everything consumed: deliveredThrough counts", func(in *progressIn) { in.deliveredThrough = 3*seg + 650 }, func(t *testing.T, out progressOut) {
			if !out.write || out.manifest.Delivered != 3*seg+650 {
				t.Fatalf("%+v", out)
			}
		}},
		{"positions never go back", func(in *progressIn) {
			in.floor, in.delivered, in.deliveredThrough, in.apply, in.now = 2*seg, 2*seg, 2*seg, 0, t0.Add(time.Minute)
		}, func(t *testing.T, out progressOut) {
			m := out.manifest
			if m.Floor != saved.Floor || m.Delivered != saved.Delivered || m.Restart != saved.Restart || m.ShadowReplay != saved.ShadowReplay {
				t.Fatalf("went back: %+v", m)
			}
		}},
		{"the restart point passed a segment: trim, compact, sweep", func(in *progressIn) {
			in.floor, in.apply = 5*seg+10, 40*seg
		}, func(t *testing.T, out progressOut) {
			if !out.write || !out.restartMoved || out.manifest.Restart != 5*seg || out.trimBelow != 5*seg {
				t.Fatalf("%+v", out)
			}
			// retention 256 MiB = 16 segments behind apply, but never past the restart point.
			if out.archiveKeep != 5*seg {
				t.Fatalf("archive keeps from %s", out.archiveKeep)
			}
		}},
		{"the archive keeps retention behind the shadow", func(in *progressIn) {
			in.floor, in.apply = 30*seg+10, 40*seg
		}, func(t *testing.T, out progressOut) {
			if out.archiveKeep != 24*seg {
				t.Fatalf("archive keeps from %s, want %s", out.archiveKeep, wal.LSN(24*seg))
			}
		}},
		{"spooled: the slot may release what the spool holds", func(in *progressIn) { in.releaseSpooled, in.flushSent = true, 3*seg }, func(t *testing.T, out progressOut) {
			if out.slotFlush != 3*seg+800 || out.slotApply != saved.Floor {
				t.Fatalf("flush %s apply %s", out.slotFlush, out.slotApply)
			}
			if out.sendStatus {
				t.Fatal("an early status for 800 bytes")
			}
		}},
		{"spooled: far past the last status, one goes now", func(in *progressIn) {
			in.releaseSpooled, in.spooled, in.received, in.flushSent = true, 9*seg, 9*seg, 3*seg
		}, func(t *testing.T, out progressOut) {
			if !out.sendStatus || out.slotFlush != 9*seg {
				t.Fatalf("%+v", out)
			}
		}},
		{"spooled, the spool behind the floor (just reset): the floor", func(in *progressIn) {
			in.releaseSpooled, in.spooled = true, 3*seg
		}, func(t *testing.T, out progressOut) {
			if out.slotFlush != saved.Floor {
				t.Fatalf("flush %s", out.slotFlush)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := base
			if c.edit != nil {
				c.edit(&in)
			}
			c.check(t, decideProgress(in))
		})
	}
}
