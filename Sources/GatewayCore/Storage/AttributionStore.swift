/// Every role of the gateway's durable state, as one backend (SQLite, PostgreSQL, memory)
/// provides them. Code that needs one role holds that role's protocol; the assembly that
/// starts a gateway holds the whole.
public typealias AttributionStore = RecordStore & OutboxStore & DeadLetterStore & PendingStore & SDKUserStore
    & RetentionStore & ForgetStore & ReportStore
