package session

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/redpanda-data/benthos/v4/public/service"
)

// benthosHandler sends the engines' slog records to benthos' logger, so
// they follow the pipeline's logger config.
type benthosHandler struct {
	l     *service.Logger
	attrs string
}

func newBenthosHandler(l *service.Logger) slog.Handler {
	if l == nil {
		return slog.DiscardHandler
	}
	return &benthosHandler{l: l}
}

func (h *benthosHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *benthosHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	b.WriteString(h.attrs)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	msg := b.String()
	switch {
	case r.Level >= slog.LevelError:
		h.l.Error(msg)
	case r.Level >= slog.LevelWarn:
		h.l.Warn(msg)
	case r.Level >= slog.LevelInfo:
		h.l.Info(msg)
	default:
		h.l.Debug(msg)
	}
	return nil
}

func (h *benthosHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	var b strings.Builder
	b.WriteString(h.attrs)
	for _, a := range attrs {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
	}
	return &benthosHandler{l: h.l, attrs: b.String()}
}

func (h *benthosHandler) WithGroup(string) slog.Handler { return h }
