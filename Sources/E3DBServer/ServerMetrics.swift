import Metrics
import Prometheus
import Synchronization

/// Request metrics through swift-metrics, exported in Prometheus' text format when enabled. Labels are the route
/// template (never a path with ids), the method and the status.
enum ServerMetrics {
    private static let registry = Mutex<PrometheusCollectorRegistry?>(nil)

    /// Bootstraps swift-metrics with a Prometheus registry, once per process.
    static func bootstrap() -> PrometheusCollectorRegistry {
        registry.withLock { current in
            if let current { return current }
            let made = PrometheusCollectorRegistry()
            MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: made))
            current = made
            return made
        }
    }

    static func record(method: String, route: String, status: Int, elapsed: Duration) {
        let dimensions = [("method", method), ("route", route), ("status", String(status))]
        Counter(label: "e3db_http_requests_total", dimensions: dimensions).increment()
        Metrics.Timer(label: "e3db_http_request_duration_seconds", dimensions: [("route", route)])
            .recordNanoseconds(
                elapsed.components.seconds * 1_000_000_000 + elapsed.components.attoseconds / 1_000_000_000)
    }

    /// Bytes of encrypted file bodies stored or served.
    static func fileBytes(_ direction: String, _ count: Int64) {
        Counter(label: "e3db_file_bytes_total", dimensions: [("direction", direction)]).increment(by: count)
    }
}
