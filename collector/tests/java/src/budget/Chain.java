package budget;

import com.sun.net.httpserver.HttpServer;
import io.opentelemetry.api.common.Attributes;
import io.opentelemetry.api.trace.Span;
import io.opentelemetry.api.trace.SpanKind;
import io.opentelemetry.exporter.otlp.http.trace.OtlpHttpSpanExporter;
import io.opentelemetry.sdk.common.Clock;
import io.opentelemetry.sdk.resources.Resource;
import io.opentelemetry.sdk.trace.SdkTracerProvider;
import io.opentelemetry.sdk.trace.export.BatchSpanProcessor;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.net.http.HttpTimeoutException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;

/**
 * An HTTP chain, java-frontend -> java-orders -> java-inventory, on the JDK's HttpServer and
 * HttpClient with the OpenTelemetry Java SDK exporting OTLP/HTTP protobuf. Run by
 * collector/tests/collector/java_http.rs:
 *
 * <pre>java budget.Chain VARIANT OTLP_HTTP_ADDR</pre>
 *
 * "propagate": every hop follows {@link Budget}. "fixed": orders calls inventory with a fixed
 * 2 s HttpClient timeout and forwards no deadline. "skewed": as "propagate", but inventory's
 * clock runs 1500 ms behind (its deadline reading and its span timestamps). "late": as
 * "propagate", but frontend asks only 5 ms of work below it and then renders for 4/5 of the
 * checkout's own work itself, never checking its deadline: the slow checkout's 200 comes late.
 * The user sends a
 * warm-up checkout (5 s deadline), two fast checkouts and one slow one (inventory needs 1500 ms)
 * with a 1 s deadline each, then prints the statuses it saw as JSON.
 */
public final class Chain {
  static final long FRONTEND_CAP_MS = 3000; // generous: a cold JVM's first request is slow
  static final long INVENTORY_CAP_MS = 2000;
  static final long FIXED_TIMEOUT_MS = 2000;
  static final long USER_DEADLINE_MS = 1000;
  static final long SKEW_MS = -1500;

  static final List<SdkTracerProvider> PROVIDERS = new ArrayList<>();
  static final List<HttpServer> SERVERS = new ArrayList<>();

  static SdkTracerProvider provider(String service, String otlp, long offsetMs) {
    OtlpHttpSpanExporter exporter =
        OtlpHttpSpanExporter.builder().setEndpoint("http://" + otlp + "/v1/traces").build();
    Clock system = Clock.getDefault();
    Clock clock = new Clock() { // the machine's clock, off by offsetMs
      public long now() { return system.now() + offsetMs * 1_000_000; }
      public long nanoTime() { return system.nanoTime(); }
    };
    SdkTracerProvider provider = SdkTracerProvider.builder()
        .setResource(Resource.create(Attributes.builder().put("service.name", service).build()))
        .addSpanProcessor(BatchSpanProcessor.builder(exporter)
            .setScheduleDelay(Duration.ofMillis(200)).build())
        .setClock(clock)
        .build();
    PROVIDERS.add(provider);
    return provider;
  }

  static String serve(Budget.Handler handler, SdkTracerProvider provider, long offsetMs, Long defaultMs)
      throws IOException {
    HttpServer server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
    server.setExecutor(Executors.newCachedThreadPool(r -> {
      Thread t = new Thread(r);
      t.setDaemon(true);
      return t;
    }));
    server.createContext("/", Budget.hop(provider.get("javachain"), new Budget.Clock(offsetMs),
        defaultMs, handler));
    server.start();
    SERVERS.add(server);
    return "http://127.0.0.1:" + server.getAddress().getPort();
  }

  static long workOf(String path) {
    return Long.parseLong(path.substring(path.lastIndexOf('/') + 1));
  }

  public static void main(String[] args) throws Exception {
    if (args.length != 2 || !List.of("propagate", "fixed", "skewed", "late").contains(args[0])) {
      System.err.println("usage: java budget.Chain propagate|fixed|skewed|late OTLP_HTTP_ADDR");
      System.exit(2);
    }
    String variant = args[0];
    String otlp = args[1];
    String prefix = "java-" + variant + "-";
    long inventoryOffset = variant.equals("skewed") ? SKEW_MS : 0;

    String inventory = serve((path, hop) -> {
      Budget.work(hop, workOf(path));
      return new Budget.Reply(200, "reserved");
    }, provider(prefix + "inventory", otlp, inventoryOffset), inventoryOffset, null);

    SdkTracerProvider ordersProvider = provider(prefix + "orders", otlp, 0);
    String orders = serve((path, hop) -> {
      String url = inventory + "/reserve/" + workOf(path);
      if (!variant.equals("fixed")) return Budget.call(hop, "GET inventory", url, INVENTORY_CAP_MS);
      // The broken hop: its own fixed timeout, and no deadline forwarded.
      Span span = hop.tracer().spanBuilder("GET inventory").setParent(hop.context())
          .setSpanKind(SpanKind.CLIENT).startSpan();
      try {
        span.setAttribute("budget.timeout_ms", FIXED_TIMEOUT_MS);
        HttpRequest.Builder request = HttpRequest.newBuilder(URI.create(url)).GET()
            .timeout(Duration.ofMillis(FIXED_TIMEOUT_MS));
        Budget.PROPAGATOR.inject(hop.context().with(span), request, HttpRequest.Builder::header);
        return Budget.send(span, request.build());
      } finally {
        span.end();
      }
    }, ordersProvider, 0, null);

    String frontend = serve((path, hop) -> {
      if (!variant.equals("late")) {
        return Budget.call(hop, "GET orders", orders + "/place/" + workOf(path), FRONTEND_CAP_MS);
      }
      Budget.Reply reply = Budget.call(hop, "GET orders", orders + "/place/5", FRONTEND_CAP_MS);
      Thread.sleep(workOf(path) * 4 / 5); // rendering, past its deadline, never checking it
      return reply;
    }, provider(prefix + "frontend", otlp, 0), 0, null);

    // The user: a plain HttpClient (no tracing) that waits USER_DEADLINE_MS for each checkout.
    HttpClient user = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
    Map<String, Object> seen = new LinkedHashMap<>();
    String[][] checkouts = {{"warm-up", "5", "5000"}, {"fast-1", "5", "" + USER_DEADLINE_MS},
        {"fast-2", "5", "" + USER_DEADLINE_MS}, {"slow", "1500", "" + USER_DEADLINE_MS}};
    for (String[] c : checkouts) { // the first one warms a cold JVM up with a generous deadline
      long waitMs = Long.parseLong(c[2]);
      // The deadline it sends is what it means; it reads an answer that comes a little late.
      HttpRequest request = HttpRequest.newBuilder(URI.create(frontend + "/checkout/" + c[1]))
          .timeout(Duration.ofMillis(waitMs + 500))
          .header("X-Request-Deadline", Long.toString(System.currentTimeMillis() + waitMs))
          .build();
      try {
        seen.put(c[0], user.send(request, HttpResponse.BodyHandlers.discarding()).statusCode());
      } catch (HttpTimeoutException e) {
        seen.put(c[0], "timeout");
      }
    }
    Thread.sleep(1000); // where a hop ignores the deadline, let its work finish, then flush
    for (HttpServer server : SERVERS) server.stop(0);
    for (SdkTracerProvider provider : PROVIDERS) {
      provider.shutdown().join(10, TimeUnit.SECONDS);
    }
    StringBuilder json = new StringBuilder("{");
    seen.forEach((k, v) -> json.append(json.length() > 1 ? ", " : "").append('"').append(k)
        .append("\": ").append(v instanceof String ? "\"" + v + "\"" : v));
    System.out.println(json.append('}'));
  }
}
