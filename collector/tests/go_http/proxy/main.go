// A proxy that records one span, the shape of Caddy, Traefik and most Go gateways, in front of
// an app that does slow work and then waits on two callees; run by
// collector/tests/collector/go_proxy.rs:
//
//	proxy REQUESTS OTLP_ADDR
//
// go-proxy-edge: httputil.ReverseProxy inside otelhttp.NewHandler, passing traceparent on as
// Caddy does (its transport is not traced: one SERVER span per request), with a fixed 1 s
// ResponseHeaderTimeout; when it gives up it answers 502, the ReverseProxy's own answer.
// go-proxy-app (otelhttp): local work, then a traced call to go-proxy-api, then a wait on
// legacy, a plain-HTTP service with no tracing at all. It never notices the proxy hang up.
// go-proxy-api (otelhttp): its own work, to the end.
//
// Every other request is slow. A client without tracing sends them one after another; the
// program then prints, per request, what each side logged: its trace, the status the client
// answered, when the proxy gave up (Unix ns, or null), the api's work and the app's wait on
// legacy; and the statuses the client got.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"strconv"
	"sync"
	"time"

	"budget-top.example/gohttp/service"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// The proxy's fixed timeout, and each service's time in ms (slow request, fast request).
const (
	proxyTimeout = time.Second
	appWorkSlow  = 500
	apiWorkSlow  = 800
	legacySlow   = 300
	appWorkFast  = 30
	apiWorkFast  = 30
	legacyFast   = 20
)

// What each side logged of one request, by trace.
type record struct {
	Trace    string   `json:"trace"`
	Status   int      `json:"status"`
	GaveUpNs *int64   `json:"gave_up_ns"`
	API      [2]int64 `json:"api"`
	Legacy   [2]int64 `json:"legacy"`
}

type logbook struct {
	mu      sync.Mutex
	byTrace map[string]*record
	order   []string
}

func (l *logbook) at(trace string) *record {
	l.mu.Lock()
	defer l.mu.Unlock()
	r, ok := l.byTrace[trace]
	if !ok {
		r = &record{Trace: trace}
		l.byTrace[trace] = r
		l.order = append(l.order, trace)
	}
	return r
}

func (l *logbook) set(trace string, f func(*record)) {
	r := l.at(trace)
	l.mu.Lock()
	defer l.mu.Unlock()
	f(r)
}

func traceOf(ctx context.Context) string {
	return trace.SpanContextFromContext(ctx).TraceID().String()
}

func sleepMs(ms int) { time.Sleep(time.Duration(ms) * time.Millisecond) }

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: proxy REQUESTS OTLP_ADDR")
		os.Exit(2)
	}
	requests, err := strconv.Atoi(os.Args[1])
	service.Must(err)
	endpoint := os.Args[2]
	otel.SetTextMapPropagator(propagation.TraceContext{})
	edgeTP := service.Provider("go-proxy-edge", endpoint)
	appTP := service.Provider("go-proxy-app", endpoint)
	apiTP := service.Provider("go-proxy-api", endpoint)
	book := &logbook{byTrace: map[string]*record{}}
	var working sync.WaitGroup

	api := service.Serve(otelhttp.NewHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		working.Add(1)
		defer working.Done()
		start := time.Now().UnixNano()
		if r.URL.Query().Get("slow") == "1" {
			sleepMs(apiWorkSlow)
		} else {
			sleepMs(apiWorkFast)
		}
		end := time.Now().UnixNano()
		book.set(traceOf(r.Context()), func(rec *record) { rec.API = [2]int64{start, end} })
		_, _ = io.WriteString(w, "42")
	}), "GET /price", otelhttp.WithTracerProvider(apiTP)))

	// No SDK: a service without tracing.
	legacy := service.Serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("slow") == "1" {
			sleepMs(legacySlow)
		} else {
			sleepMs(legacyFast)
		}
		_, _ = io.WriteString(w, "ok")
	}))

	client := &http.Client{Transport: otelhttp.NewTransport(http.DefaultTransport,
		otelhttp.WithTracerProvider(appTP))}
	get := func(ctx context.Context, target string) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
		service.Must(err)
		resp, err := client.Do(req)
		service.Must(err)
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}
	app := service.Serve(otelhttp.NewHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		working.Add(1)
		defer working.Done()
		// The request's trace, without its cancellation: the app works on when the proxy
		// hangs up, as most do.
		ctx := context.WithoutCancel(r.Context())
		slow := r.URL.Query().Get("slow") == "1"
		q := ""
		if slow {
			q = "?slow=1"
			sleepMs(appWorkSlow)
		} else {
			sleepMs(appWorkFast)
		}
		get(ctx, api+"/price"+q)
		start := time.Now().UnixNano()
		get(ctx, legacy+"/stock"+q)
		end := time.Now().UnixNano()
		book.set(traceOf(r.Context()), func(rec *record) { rec.Legacy = [2]int64{start, end} })
		_, _ = io.WriteString(w, "ok")
	}), "GET /order", otelhttp.WithTracerProvider(appTP)))

	target, err := url.Parse(app)
	service.Must(err)
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			// As Caddy's tracing does: the proxy's own span's context goes on.
			otel.GetTextMapPropagator().Inject(pr.In.Context(), propagation.HeaderCarrier(pr.Out.Header))
		},
		Transport: &http.Transport{ResponseHeaderTimeout: proxyTimeout},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			now := time.Now().UnixNano()
			book.set(traceOf(r.Context()), func(rec *record) { rec.GaveUpNs = &now })
			w.WriteHeader(http.StatusBadGateway)
		},
	}
	answered := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		proxy.ServeHTTP(sw, r)
		book.set(traceOf(r.Context()), func(rec *record) { rec.Status = sw.status })
	})
	edge := service.Serve(otelhttp.NewHandler(answered, "GET /order", otelhttp.WithTracerProvider(edgeTP)))

	seen := map[string]int{}
	for i := 0; i < requests; i++ {
		q := ""
		if i%2 == 0 {
			q = "?slow=1"
		}
		resp, err := http.Get(edge + "/order" + q)
		service.Must(err)
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		seen[strconv.Itoa(resp.StatusCode)]++
		time.Sleep(50 * time.Millisecond)
	}
	working.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, tp := range []*sdktrace.TracerProvider{edgeTP, appTP, apiTP} {
		service.Must(tp.Shutdown(ctx))
	}
	out := []*record{}
	for _, t := range book.order {
		out = append(out, book.byTrace[t])
	}
	b, err := json.Marshal(map[string]any{"client": seen, "requests": out})
	service.Must(err)
	fmt.Println(string(b))
}

// The status the proxy answered with.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
