// An HTTP pair, go-http-VARIANT-edge -> go-http-VARIANT-pricing, on net/http with the stock
// otelhttp instrumentation (handler and client transport) and the OTLP/gRPC exporter, and
// nothing of budget-top's. Run by collector/tests/collector/go_http.rs:
//
//	gohttp VARIANT REQUESTS OTLP_ADDR
//
// VARIANT "request": the edge calls pricing with r.Context(), as it should.
// VARIANT "background": the edge calls pricing with context.Background() (the classic Go
// mistake): no deadline, no cancellation and no trace reach pricing.
// A client without tracing sends REQUESTS requests one after another, then the program prints
// how many were answered 200 as JSON.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"time"

	"budget-top.example/gohttp/service"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
)

func main() {
	if len(os.Args) != 4 || (os.Args[1] != "request" && os.Args[1] != "background") {
		fmt.Fprintln(os.Stderr, "usage: gohttp request|background REQUESTS OTLP_ADDR")
		os.Exit(2)
	}
	variant, endpoint := os.Args[1], os.Args[3]
	requests, err := strconv.Atoi(os.Args[2])
	service.Must(err)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	prefix := "go-http-" + variant + "-"
	edgeTP := service.Provider(prefix+"edge", endpoint)
	pricingTP := service.Provider(prefix+"pricing", endpoint)

	pricing := service.Serve(otelhttp.NewHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(20 * time.Millisecond)
		_, _ = io.WriteString(w, "42")
	}), "GET /price", otelhttp.WithTracerProvider(pricingTP)))

	client := &http.Client{Transport: otelhttp.NewTransport(http.DefaultTransport,
		otelhttp.WithTracerProvider(edgeTP))}
	edge := service.Serve(otelhttp.NewHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		if variant == "background" {
			ctx = context.Background()
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, pricing+"/price", nil)
		service.Must(err)
		resp, err := client.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		_, _ = io.WriteString(w, "ok")
	}), "GET /quote", otelhttp.WithTracerProvider(edgeTP)))

	answered := 0
	for i := 0; i < requests; i++ {
		resp, err := http.Get(edge + "/quote")
		service.Must(err)
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			answered++
		}
		// Requests apart in time: each call lies inside exactly one request.
		time.Sleep(30 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	service.Must(edgeTP.Shutdown(ctx))
	service.Must(pricingTP.Shutdown(ctx))
	out, err := json.Marshal(map[string]int{"200": answered})
	service.Must(err)
	fmt.Println(string(out))
}
