package session

import (
	"context"
	"fmt"
	"time"

	"github.com/walshadow/walshadow/internal/shadow"
)

// bridgeSocket is where the shadow's bridge worker listens: beside the
// walsender's socket, in a directory only the shadow's OS user (and root)
// can enter.
func (s *Session) bridgeSocket() string { return shadow.DefaultBridgeSocketPath(s.runDir()) }

// dialBridge connects to the bridge worker the shadow preloads, waiting for
// it to come up with the shadow, and checks it serves a standby of the
// source's major version.
func (s *Session) dialBridge(ctx context.Context, p *parts) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var lastErr error
	for {
		b, err := shadow.DialBridge(ctx, s.bridgeSocket())
		if err == nil {
			h, herr := b.Hello(ctx)
			if herr == nil {
				if int(h.PGVersionNum)/10000 != p.boot.ServerVersionNum/10000 || !h.InRecovery {
					b.Close()
					return fmt.Errorf("the shadow's bridge reports PostgreSQL %d, in recovery %v; want a standby of major %d",
						h.PGVersionNum, h.InRecovery, p.boot.ServerVersionNum/10000)
				}
				p.bridge = b
				return nil
			}
			b.Close()
			err = herr
		}
		lastErr = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("the shadow's bridge worker at %s did not answer (is %s in shared_preload_libraries?): %v", s.bridgeSocket(), shadow.BridgeLibrary, lastErr)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Bridge is the shadow's bridge client (nil before Start, or when no bridge
// is configured).
func (s *Session) Bridge() *shadow.Bridge {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.parts == nil {
		return nil
	}
	return s.parts.bridge
}
