package models

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/llm"
)

// Ping opens the model spec names, as Open does, and asks it for one
// output token, once (no retry): the cheapest request that shows the
// key, the address and the model's name all work. It returns the model
// and how long its answer took; ctx bounds the wait. An error's text
// says why in plain words (PlainReason).
func Ping(ctx context.Context, spec string, cfg config.Model) (llm.ModelInfo, time.Duration, error) {
	m, err := open(spec, cfg, -1)
	if err != nil {
		return llm.ModelInfo{}, 0, err
	}
	info := m.Info()
	begin := time.Now()
	seq, err := m.Stream(ctx, llm.Request{MaxTokens: 1, Messages: []llm.Message{
		{Role: llm.RoleUser, Content: []llm.Block{{Type: llm.BlockText, Text: "Say ok."}}}}})
	if err == nil {
		_, err = llm.Collect(seq, nil)
	}
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w: %w", ctx.Err(), err)
		}
		return info, 0, err
	}
	return info, time.Since(begin), nil
}

// PlainReason says why a model request failed, for a person: what did
// not answer or what refused, without the transport's wrapping.
func PlainReason(err error) string {
	var op *net.OpError
	var dns *net.DNSError
	var ue *url.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "no answer in time" + where(err)
	case errors.Is(err, syscall.ECONNREFUSED):
		return "nothing listens" + where(err) + " (connection refused)"
	case errors.As(err, &dns):
		return "cannot resolve " + dns.Name
	case errors.Is(err, llm.ErrAuth):
		return "the provider refused the API key"
	case errors.Is(err, llm.ErrUnknownModel):
		return "the provider does not serve this model"
	case errors.Is(err, llm.ErrRateLimited):
		return "the provider's rate limit"
	case errors.As(err, &op):
		return op.Err.Error() + where(err)
	case errors.As(err, &ue):
		return ue.Err.Error()
	}
	s := err.Error()
	return s[:min(len(s), 300)]
}

// where is " at HOST:PORT" when err carries the address it failed on.
func where(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		if u, perr := url.Parse(ue.URL); perr == nil && u.Host != "" {
			return " at " + u.Host
		}
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Addr != nil {
		return " at " + strings.TrimSpace(op.Addr.String())
	}
	return ""
}
