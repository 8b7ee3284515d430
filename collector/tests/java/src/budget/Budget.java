package budget;

import com.sun.net.httpserver.Headers;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpHandler;
import io.opentelemetry.api.common.AttributeKey;
import io.opentelemetry.api.trace.Span;
import io.opentelemetry.api.trace.SpanKind;
import io.opentelemetry.api.trace.StatusCode;
import io.opentelemetry.api.trace.Tracer;
import io.opentelemetry.api.trace.propagation.W3CTraceContextPropagator;
import io.opentelemetry.context.Context;
import io.opentelemetry.context.propagation.TextMapGetter;
import io.opentelemetry.context.propagation.TextMapPropagator;
import java.io.IOException;
import java.io.OutputStream;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.net.http.HttpTimeoutException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.regex.Pattern;

/**
 * The budget contract for a Java HTTP service whose budget travels as an absolute
 * {@code X-Request-Deadline} (Unix ms), docs/instrumenting.md quotes this file. A hop reads the
 * deadline on its own clock, calls on with {@code min(remaining - margin, cap)} as the
 * HttpClient timeout, forwards that same limit as the next deadline, refuses a call when nothing
 * is left, and records the contract's span attributes (CONVENTIONS.md section 2).
 */
public final class Budget {
  public static final long MARGIN_MS = 10; // kept back for our own reply on every call
  static final String DEADLINE = "x-request-deadline";
  static final AttributeKey<List<String>> CAPTURED =
      AttributeKey.stringArrayKey("http.request.header." + DEADLINE);
  static final Pattern UNIX_MS = Pattern.compile("\\d{1,15}");
  static final Pattern UNIX_S = Pattern.compile("\\d{1,12}\\.\\d{1,9}");
  static final long DAY_MS = 24 * 3600 * 1000;
  static final TextMapPropagator PROPAGATOR = W3CTraceContextPropagator.getInstance();
  static final HttpClient CLIENT =
      HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();

  static final TextMapGetter<Headers> HEADERS = new TextMapGetter<>() {
    public String get(Headers h, String key) { return h == null ? null : h.getFirst(key); }
  };

  private Budget() {}

  /** A service's wall clock in Unix ms (a machine's clock may be off: offsetMs says by how much). */
  public record Clock(long offsetMs) {
    public long nowMs() { return System.currentTimeMillis() + offsetMs; }
  }

  /** One request being handled: its span's context and its deadline in System.nanoTime() terms. */
  public record Hop(Tracer tracer, Clock clock, Context context, Long deadlineNanos) {
    /** What is left of the budget, in ms; null when the hop has none. */
    public Long remainingMs() {
      return deadlineNanos == null ? null : (deadlineNanos - System.nanoTime()) / 1_000_000;
    }
  }

  /** What a hop answers. */
  public record Reply(int status, String body) {}

  /** The work of a hop; throws {@link Exhausted} when it runs out of budget. */
  public interface Handler {
    Reply handle(String path, Hop hop) throws IOException, InterruptedException;
  }

  /** Thrown when the budget ran out (the hop answers 504). */
  public static final class Exhausted extends IOException {
    private static final long serialVersionUID = 1L;
    public Exhausted(String message) { super(message); }
  }

  /** The absolute deadline in Unix ms (integer ms, or seconds with a fraction), or null. */
  static Long parseDeadline(String value, long nowMs) {
    Long ms = null;
    if (UNIX_MS.matcher(value).matches()) ms = Long.parseLong(value);
    else if (UNIX_S.matcher(value).matches()) ms = (long) (Double.parseDouble(value) * 1000);
    return ms != null && Math.abs(ms - nowMs) <= DAY_MS ? ms : null; // absurd: treat as absent
  }

  /** An HTTP handler whose every request is a hop; defaultMs non-null makes it an edge. */
  public static HttpHandler hop(Tracer tracer, Clock clock, Long defaultMs, Handler handler) {
    return exchange -> {
      long arrival = System.nanoTime();
      long nowMs = clock.nowMs();
      Headers headers = exchange.getRequestHeaders();
      Context parent = PROPAGATOR.extract(Context.root(), headers, HEADERS);
      String path = exchange.getRequestURI().getPath();
      Span span = tracer.spanBuilder("GET " + path).setParent(parent)
          .setSpanKind(SpanKind.SERVER).startSpan();
      String raw = headers.getFirst(DEADLINE);
      Long deadline = raw == null ? null : parseDeadline(raw.trim(), nowMs);
      Long budgetMs = null;
      if (raw != null) span.setAttribute(CAPTURED, List.of(raw)); // as the Java agent captures it
      if (deadline != null) {
        budgetMs = deadline - nowMs;
        span.setAttribute("budget.source", DEADLINE);
        span.setAttribute("budget.received_ms", budgetMs);
      } else if (raw != null) {
        span.setAttribute("budget.source", "invalid");
        span.setAttribute("budget.invalid_value", raw);
      } else if (defaultMs != null) {
        budgetMs = defaultMs;
        span.setAttribute("budget.source", "default");
        span.setAttribute("budget.default_ms", defaultMs);
      } else {
        span.setAttribute("budget.source", "none");
      }
      Hop hop = new Hop(tracer, clock, parent.with(span),
          budgetMs == null ? null : arrival + budgetMs * 1_000_000);
      Reply reply;
      String outcome = "ok";
      if (hop.remainingMs() != null && hop.remainingMs() <= 0) {
        reply = new Reply(504, "budget expired before work started");
        outcome = "shed_expired";
      } else {
        if (hop.remainingMs() != null) {
          span.setAttribute("budget.remaining_at_start_ms", hop.remainingMs());
        }
        try {
          reply = handler.handle(path, hop);
          if (reply.status() == 504) outcome = "deadline_exceeded";
          else if (reply.status() >= 500) outcome = "error";
        } catch (Exhausted e) {
          reply = new Reply(504, "out of budget");
          outcome = "deadline_exceeded";
        } catch (IOException | InterruptedException | RuntimeException e) {
          reply = new Reply(500, String.valueOf(e));
          outcome = "error";
        }
      }
      span.setAttribute("budget.outcome", outcome);
      span.setAttribute("http.response.status_code", (long) reply.status());
      if (reply.status() >= 500) span.setStatus(StatusCode.ERROR);
      span.end(); // before replying: the caller's span must not end before ours
      byte[] body = reply.body().getBytes(StandardCharsets.UTF_8);
      exchange.sendResponseHeaders(reply.status(), body.length);
      try (OutputStream out = exchange.getResponseBody()) {
        out.write(body);
      }
    };
  }

  /** Works for workMs, or gives up MARGIN_MS before the deadline so the reply is still read. */
  public static void work(Hop hop, long workMs) throws Exhausted, InterruptedException {
    Long remaining = hop.remainingMs();
    if (remaining == null || workMs <= remaining - MARGIN_MS) {
      Thread.sleep(workMs);
      return;
    }
    Thread.sleep(Math.max(0, remaining - MARGIN_MS));
    throw new Exhausted("out of budget after " + remaining + " ms");
  }

  /**
   * GET url from inside a hop with min(remaining - margin, capMs) as the HttpClient timeout, and
   * that same limit forwarded as the callee's X-Request-Deadline (on this hop's clock).
   */
  public static Reply call(Hop hop, String name, String url, long capMs)
      throws IOException, InterruptedException {
    Span span = hop.tracer().spanBuilder(name).setParent(hop.context())
        .setSpanKind(SpanKind.CLIENT).startSpan();
    try {
      long timeoutMs = capMs;
      span.setAttribute("budget.sla_ms", capMs);
      Long remaining = hop.remainingMs();
      if (remaining != null) {
        span.setAttribute("budget.remaining_ms", remaining);
        timeoutMs = Math.min(capMs, remaining - MARGIN_MS);
      }
      span.setAttribute("budget.timeout_ms", timeoutMs);
      if (timeoutMs <= 0) {
        span.setAttribute("budget.outcome", "refused"); // the call is not made
        throw new Exhausted("no budget left for " + name);
      }
      HttpRequest.Builder request = HttpRequest.newBuilder(URI.create(url)).GET()
          .timeout(Duration.ofMillis(timeoutMs))
          .header(DEADLINE, Long.toString(hop.clock().nowMs() + timeoutMs));
      span.setAttribute("budget.forwarded_ms", timeoutMs);
      PROPAGATOR.inject(hop.context().with(span), request, HttpRequest.Builder::header);
      return send(span, request.build());
    } finally {
      span.end();
    }
  }

  /** Sends request under span, recording the answer, or the timeout as deadline_exceeded. */
  public static Reply send(Span span, HttpRequest request) throws IOException, InterruptedException {
    HttpResponse<String> response;
    try {
      response = CLIENT.send(request, HttpResponse.BodyHandlers.ofString());
    } catch (HttpTimeoutException e) {
      span.setAttribute("budget.outcome", "deadline_exceeded");
      span.setStatus(StatusCode.ERROR, "timed out");
      throw new Exhausted("timed out: " + request.uri());
    }
    int status = response.statusCode();
    span.setAttribute("http.response.status_code", (long) status);
    if (status == 503) span.setAttribute("budget.outcome", "shed_full");
    else if (status == 504) span.setAttribute("budget.outcome", "deadline_exceeded");
    else if (status >= 500) span.setAttribute("budget.outcome", "error");
    return new Reply(status, response.body());
  }
}
