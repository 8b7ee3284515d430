// A gRPC chain, go-frontend -> go-orders -> go-inventory, built on grpc-go with the stock
// otelgrpc instrumentation and the OTLP/gRPC exporter, plus the contract's attributes from
// package budget. Run by collector/tests/collector/go_grpc.rs:
//
//	gochain VARIANT OTLP_ADDR [OTLP_ADDR...]
//
// VARIANT "propagate": every hop passes its context on, so the deadline flows down the chain.
// VARIANT "fixed": orders calls inventory with context.Background() and its own 2 s timeout.
// The client sends two fast checkouts and one slow one (inventory needs 1500 ms) with a 1 s
// deadline each (GOCHAIN_ROUNDS times, default once), then prints the gRPC status codes it saw
// as JSON. Every span goes to every OTLP_ADDR.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	"budget-top.example/gochain/budget"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

const (
	frontendSLA  = time.Second            // frontend's cap on its call to orders
	inventorySLA = 500 * time.Millisecond // orders' cap on its call to inventory ("propagate")
	fixedTimeout = 2 * time.Second        // orders' own timeout on that call ("fixed")
	userDeadline = time.Second            // what the client waits for a checkout
)

// A unary method taking and returning a string (the request says how long inventory works).
type handler func(ctx context.Context, in string) (string, error)

func serve(name, method string, tp trace.TracerProvider, h handler) string {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	must(err)
	s := grpc.NewServer(
		grpc.StatsHandler(otelgrpc.NewServerHandler(otelgrpc.WithTracerProvider(tp))),
		grpc.UnaryInterceptor(budget.ServerInterceptor))
	s.RegisterService(&grpc.ServiceDesc{
		ServiceName: name,
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{MethodName: method, Handler: func(_ any, ctx context.Context,
			dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
			in := new(wrapperspb.StringValue)
			if err := dec(in); err != nil {
				return nil, err
			}
			call := func(ctx context.Context, req any) (any, error) {
				out, err := h(ctx, req.(*wrapperspb.StringValue).GetValue())
				if err != nil {
					return nil, err
				}
				return wrapperspb.String(out), nil
			}
			info := &grpc.UnaryServerInfo{FullMethod: "/" + name + "/" + method}
			return interceptor(ctx, in, info, call)
		}}},
	}, struct{}{})
	go func() { _ = s.Serve(lis) }()
	return lis.Addr().String()
}

func dial(addr string, tp trace.TracerProvider) *grpc.ClientConn {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithStatsHandler(budget.ClientHandler(otelgrpc.NewClientHandler(otelgrpc.WithTracerProvider(tp)))))
	must(err)
	return conn
}

func invoke(ctx context.Context, conn *grpc.ClientConn, method, in string) (string, error) {
	out := new(wrapperspb.StringValue)
	err := conn.Invoke(ctx, method, wrapperspb.String(in), out)
	return out.GetValue(), err
}

func provider(service string, endpoints []string) *sdktrace.TracerProvider {
	opts := []sdktrace.TracerProviderOption{
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", service))),
	}
	for _, endpoint := range endpoints {
		exp, err := otlptracegrpc.New(context.Background(),
			otlptracegrpc.WithEndpoint(endpoint), otlptracegrpc.WithInsecure())
		must(err)
		opts = append(opts, sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(200*time.Millisecond)))
	}
	return sdktrace.NewTracerProvider(opts...)
}

func main() {
	if len(os.Args) < 3 || (os.Args[1] != "propagate" && os.Args[1] != "fixed") {
		fmt.Fprintln(os.Stderr, "usage: gochain propagate|fixed OTLP_ADDR [OTLP_ADDR...]")
		os.Exit(2)
	}
	variant, endpoints := os.Args[1], os.Args[2:]
	otel.SetTextMapPropagator(propagation.TraceContext{})
	prefix := "go-" + variant + "-"
	frontendTP := provider(prefix+"frontend", endpoints)
	ordersTP := provider(prefix+"orders", endpoints)
	inventoryTP := provider(prefix+"inventory", endpoints)

	inventory := serve("shop.Inventory", "Reserve", inventoryTP, func(ctx context.Context, work string) (string, error) {
		d, err := time.ParseDuration(work)
		if err != nil {
			return "", err
		}
		if err := budget.Work(ctx, d); err != nil {
			return "", err
		}
		return "reserved", nil
	})
	toInventory := dial(inventory, ordersTP)

	orders := serve("shop.Orders", "Place", ordersTP, func(ctx context.Context, work string) (string, error) {
		if variant == "fixed" {
			// A fresh context with a timeout of its own: the caller's deadline is dropped (the
			// trace is kept, so the chain stays one trace) and grpc-go forwards 2 s instead.
			callCtx := trace.ContextWithSpan(context.Background(), trace.SpanFromContext(ctx))
			callCtx, cancel := context.WithTimeout(callCtx, fixedTimeout)
			defer cancel()
			return invoke(callCtx, toInventory, "/shop.Inventory/Reserve", work)
		}
		callCtx, cancel, err := budget.Call(ctx, ordersTP.Tracer("gochain"), "shop.Inventory/Reserve", inventorySLA)
		if err != nil {
			return "", err
		}
		defer cancel()
		return invoke(callCtx, toInventory, "/shop.Inventory/Reserve", work)
	})
	toOrders := dial(orders, frontendTP)

	frontend := serve("shop.Frontend", "Checkout", frontendTP, func(ctx context.Context, work string) (string, error) {
		callCtx, cancel, err := budget.Call(ctx, frontendTP.Tracer("gochain"), "shop.Orders/Place", frontendSLA)
		if err != nil {
			return "", err
		}
		defer cancel()
		return invoke(callCtx, toOrders, "/shop.Orders/Place", work)
	})

	// The user: a plain gRPC client (no tracing) that waits userDeadline for each checkout.
	user, err := grpc.NewClient(frontend, grpc.WithTransportCredentials(insecure.NewCredentials()))
	must(err)
	rounds, err := strconv.Atoi(os.Getenv("GOCHAIN_ROUNDS"))
	if err != nil || rounds < 1 || rounds > 100 {
		rounds = 1
	}
	seen := map[string][]string{}
	for range rounds {
		for _, c := range []struct{ name, work string }{{"fast-1", "5ms"}, {"fast-2", "5ms"}, {"slow", "1500ms"}} {
			ctx, cancel := context.WithTimeout(context.Background(), userDeadline)
			_, err := invoke(ctx, user, "/shop.Frontend/Checkout", c.work)
			cancel()
			seen[c.name] = append(seen[c.name], status.Code(err).String())
		}
	}
	// Let the slow request's work finish where a hop ignores the deadline, then flush.
	time.Sleep(time.Second)
	for _, tp := range []*sdktrace.TracerProvider{frontendTP, ordersTP, inventoryTP} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		must(tp.Shutdown(ctx))
		cancel()
	}
	must(json.NewEncoder(os.Stdout).Encode(seen))
}

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "gochain:", err)
		os.Exit(1)
	}
}
