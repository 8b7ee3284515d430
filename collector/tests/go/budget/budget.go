// Package budget is the budget contract for a Go gRPC service (docs/instrumenting.md quotes
// this file). grpc-go already carries the budget: an incoming grpc-timeout becomes the
// handler's context deadline, and an outgoing call's context deadline is written as its
// grpc-timeout. What a team adds is the per-call rule, min(sla, remaining - margin), and the
// contract's span attributes (CONVENTIONS.md section 2) on the spans the stock otelgrpc
// instrumentation makes.
package budget

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
)

// Margin is kept back on every call for the hop's own reply.
const Margin = 10 * time.Millisecond

// ServerInterceptor records the budget a hop received on the SERVER span otelgrpc started,
// sheds a request that arrives with nothing left, and records the outcome.
func ServerInterceptor(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	span := trace.SpanFromContext(ctx)
	deadline, hasBudget := ctx.Deadline()
	if !hasBudget {
		span.SetAttributes(attribute.String("budget.source", "none"))
		resp, err := handler(ctx, req)
		span.SetAttributes(attribute.String("budget.outcome", outcome(ctx, err)))
		return resp, err
	}
	left := time.Until(deadline)
	span.SetAttributes(attribute.String("budget.source", "grpc-timeout"),
		attribute.Int64("budget.received_ms", left.Milliseconds()))
	if left <= 0 {
		span.SetAttributes(attribute.String("budget.outcome", "shed_expired"))
		return nil, status.Error(codes.DeadlineExceeded, "budget expired before work started")
	}
	span.SetAttributes(attribute.Int64("budget.remaining_at_start_ms", left.Milliseconds()))
	resp, err := handler(ctx, req)
	span.SetAttributes(attribute.String("budget.outcome", outcome(ctx, err)))
	return resp, err
}

func outcome(ctx context.Context, err error) string {
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded) || status.Code(err) == codes.DeadlineExceeded:
		return "deadline_exceeded"
	case errors.Is(ctx.Err(), context.Canceled) || status.Code(err) == codes.Canceled:
		return "cancelled"
	case err != nil:
		return "error"
	}
	return "ok"
}

// Work waits for d, or gives up when the budget runs out: Margin before the deadline, so the
// reply reaches the caller before it stops waiting.
func Work(ctx context.Context, d time.Duration) error {
	stop := ctx.Done()
	if deadline, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline.Add(-Margin))
		defer cancel()
		stop = ctx.Done()
	}
	select {
	case <-time.After(d):
		return nil
	case <-stop:
		return status.Error(codes.DeadlineExceeded, "out of budget")
	}
}

type callKey struct{}

type callBudget struct {
	remaining, sla time.Duration
	hasDeadline    bool // remaining is known only when the hop had a deadline
}

// ErrNoBudget: the call was refused because nothing positive remained.
var ErrNoBudget = status.Error(codes.DeadlineExceeded, "no budget left for the call")

// Call derives the context for one outgoing call from the hop's: min(sla, remaining - margin)
// as its deadline, which grpc-go forwards as grpc-timeout. sla <= 0 means no per-call cap.
// It refuses (ErrNoBudget, and a CLIENT span saying so) when nothing positive remains.
func Call(ctx context.Context, tracer trace.Tracer, method string, sla time.Duration) (context.Context, context.CancelFunc, error) {
	deadline, ok := ctx.Deadline()
	if !ok {
		if sla <= 0 {
			return ctx, func() {}, nil
		}
		ctx = context.WithValue(ctx, callKey{}, callBudget{sla: sla})
		c, cancel := context.WithTimeout(ctx, sla)
		return c, cancel, nil
	}
	remaining := time.Until(deadline)
	timeout := remaining - Margin
	if sla > 0 && sla < timeout {
		timeout = sla
	}
	if timeout.Milliseconds() <= 0 {
		_, span := tracer.Start(ctx, method, trace.WithSpanKind(trace.SpanKindClient),
			trace.WithAttributes(attribute.Int64("budget.remaining_ms", remaining.Milliseconds()),
				attribute.Int64("budget.timeout_ms", timeout.Milliseconds()),
				attribute.String("budget.outcome", "refused"))) // the call is not made
		span.End()
		return ctx, func() {}, ErrNoBudget
	}
	ctx = context.WithValue(ctx, callKey{}, callBudget{remaining: remaining, sla: sla, hasDeadline: true})
	c, cancel := context.WithTimeout(ctx, timeout)
	return c, cancel, nil
}

// ClientHandler wraps otelgrpc's client stats handler: on the CLIENT span it starts, it records
// the timeout the call runs under (which grpc-go forwards as grpc-timeout) and, for calls made
// through Call, what remained of the hop's budget and the per-call cap.
func ClientHandler(inner stats.Handler) stats.Handler { return clientHandler{inner} }

type clientHandler struct{ stats.Handler }

func (h clientHandler) TagRPC(ctx context.Context, info *stats.RPCTagInfo) context.Context {
	ctx = h.Handler.TagRPC(ctx, info)
	span := trace.SpanFromContext(ctx)
	if deadline, ok := ctx.Deadline(); ok {
		ms := time.Until(deadline).Milliseconds()
		span.SetAttributes(attribute.Int64("budget.timeout_ms", ms), attribute.Int64("budget.forwarded_ms", ms))
	}
	if b, ok := ctx.Value(callKey{}).(callBudget); ok {
		if b.hasDeadline {
			span.SetAttributes(attribute.Int64("budget.remaining_ms", b.remaining.Milliseconds()))
		}
		if b.sla > 0 {
			span.SetAttributes(attribute.Int64("budget.sla_ms", b.sla.Milliseconds()))
		}
	}
	return ctx
}

func (h clientHandler) HandleRPC(ctx context.Context, s stats.RPCStats) {
	if end, ok := s.(*stats.End); ok && end.Error != nil {
		span := trace.SpanFromContext(ctx)
		switch status.Code(end.Error) {
		case codes.DeadlineExceeded:
			span.SetAttributes(attribute.String("budget.outcome", "deadline_exceeded"))
		case codes.ResourceExhausted:
			span.SetAttributes(attribute.String("budget.outcome", "shed_full"))
		default:
			span.SetAttributes(attribute.String("budget.outcome", "error"))
		}
	}
	h.Handler.HandleRPC(ctx, s)
}
