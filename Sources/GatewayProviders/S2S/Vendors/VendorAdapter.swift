import Foundation
import GatewayCore

/// One HTTP request to a vendor.
public struct VendorRequest: Sendable {
    public enum Method: String, Sendable { case get = "GET", post = "POST" }
    public var method: Method
    /// Carries the query; may hold a key (Singular's `a`), so it is never logged.
    public var url: String
    public var headers: [(String, String)]
    public var body: Data?

    public init(method: Method, url: String, headers: [(String, String)] = [], body: Data? = nil) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
    }
}

/// Why an event cannot go to a vendor as it is (a field the vendor requires is missing,
/// or the vendor would refuse it): it goes to the dead-letter queue without a call, with
/// this reason, and can be replayed once the config or data is mended.
public struct VendorRefusal: Error, Sendable, Equatable {
    public var reason: String

    public init(_ reason: String) {
        self.reason = reason
    }
}

/// A vendor's server-to-server wire format: which records it takes, the request for
/// each, and what its answers mean. Pure, so each format is tested without a network.
public protocol VendorAdapter: Sendable {
    var vendor: Vendor { get }
    /// The record kinds this vendor's S2S API takes.
    var kinds: [RecordKind] { get }
    /// The request for one stored event. `now` is for age limits.
    func request(for event: RawEvent, record: AttributionRecord, now: Date) throws(VendorRefusal) -> VendorRequest
    /// What the vendor's answer means for the event, which arrived `age` ago.
    func outcome(status: Int, body: String, retryAfter: Duration?, age: Duration) -> DeliveryOutcome
    /// The SKAN conversion value in the answer to a delivered event, if the vendor
    /// returns one. None by default.
    func conversionValue(answer body: String) -> VendorConversionValue?
    /// The requests that ask the vendor to erase the user a forget request names (none
    /// when the gateway holds no id the vendor knows the user by), or why it cannot ask.
    func forgetRequests(for request: ForgetRequest) -> VendorForget
    /// What the vendor's answer to one of those requests means.
    func forgetOutcome(status: Int, body: String, retryAfter: Duration?) -> ForgetOutcome
}

extension VendorAdapter {
    public func conversionValue(answer body: String) -> VendorConversionValue? { nil }
    public func forgetRequests(for request: ForgetRequest) -> VendorForget {
        .notSupported("the gateway does not call \(vendor.displayName)'s deletion API")
    }
    public func forgetOutcome(status: Int, body: String, retryAfter: Duration?) -> ForgetOutcome {
        defaultForgetOutcome(status: status, body: body, retryAfter: retryAfter)
    }

    /// `2xx` done; `408`, `429`, `5xx` again later; another `4xx` failed.
    func defaultForgetOutcome(status: Int, body: String, retryAfter: Duration?) -> ForgetOutcome {
        switch status {
        case 200..<300: .done
        case 408, 429, 500...599: .retry(reason: "\(vendor.displayName) answered \(status)", after: retryAfter)
        // A key without the right is the configuration's to mend: kept until it is.
        case 401, 403:
            .retry(reason: "\(vendor.displayName) answered \(status): check its deletion API key", after: .zero)
        default: .failed(reason: "\(vendor.displayName) answered \(status): \(body.prefix(200))")
        }
    }
}

/// How a vendor is asked to erase a user.
public enum VendorForget: Sendable {
    case requests([VendorRequest])
    case notSupported(String)
}

/// The conversion value a vendor returned for an event, for the app to set
/// (`updatePostbackConversionValue`).
public struct VendorConversionValue: Sendable, Equatable {
    /// The fine value, 0–63.
    public var fineValue: Int
    /// SKAN 4: low, medium or high.
    public var coarseValue: String?
    /// SKAN 4: whether the app should lock the current window.
    public var lockWindow: Bool?

    public init(fineValue: Int, coarseValue: String? = nil, lockWindow: Bool? = nil) {
        self.fineValue = fineValue
        self.coarseValue = coarseValue
        self.lockWindow = lockWindow
    }
}

/// Decimal amounts as plain text (`9.99`), never in exponent form.
enum AmountText {
    static func format(_ amount: Decimal) -> String {
        amount.description
    }
}

/// JSON text of an object with sorted keys, for values vendors want as a JSON string.
enum JSONText {
    static func object(_ object: [String: JSONValue]) -> String {
        JSONValue.object(object).jsonText
    }
}
