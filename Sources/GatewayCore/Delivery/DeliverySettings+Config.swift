extension DeliverySettings {
    /// Reads the delivery keys every destination shares (`batch_size`, `max_attempts`,
    /// `backoff_initial_ms`, `backoff_max_ms`, `paused`, `in_device_order`) over `defaults`: the same keys
    /// under `sinks:` and under a vendor of `providers.s2s`.
    public static func read(_ reader: ConfigReader, defaults: DeliverySettings) -> DeliverySettings {
        var delivery = defaults
        if let size = reader.int("batch_size", in: 1...10_000) { delivery.batchSize = size }
        if let attempts = reader.int("max_attempts", in: 1...1000) { delivery.maxAttempts = attempts }
        if let ms = reader.int("backoff_initial_ms", in: 1...86_400_000) { delivery.backoffInitial = .milliseconds(ms) }
        if let ms = reader.int("backoff_max_ms", in: 1...86_400_000) { delivery.backoffMax = .milliseconds(ms) }
        if let paused = reader.bool("paused") { delivery.paused = paused }
        if let ordered = reader.bool("in_device_order") { delivery.inDeviceOrder = ordered }
        if delivery.backoffMax < delivery.backoffInitial {
            reader.report("backoff_max_ms must not be less than backoff_initial_ms", key: "backoff_max_ms")
        }
        return delivery
    }
}
