// Package service is what both programs of this module start a service with: a tracer
// provider exporting to OTLP/gRPC, a handler served on a loopback port, and an exit on error.
package service

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Provider exports the spans of the service named name to the OTLP/gRPC receiver at endpoint.
func Provider(name, endpoint string) *sdktrace.TracerProvider {
	exp, err := otlptracegrpc.New(context.Background(),
		otlptracegrpc.WithEndpoint(endpoint), otlptracegrpc.WithInsecure())
	Must(err)
	return sdktrace.NewTracerProvider(
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", name))),
		sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(200*time.Millisecond)))
}

// Serve serves h on a free loopback port; it returns the service's URL.
func Serve(h http.Handler) string {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	Must(err)
	go func() { _ = http.Serve(lis, h) }()
	return "http://" + lis.Addr().String()
}

// Must exits with err on stderr, if there is one.
func Must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
