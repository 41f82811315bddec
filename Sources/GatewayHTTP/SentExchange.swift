import AsyncHTTPClient
import NIOCore
import NIOHTTP1
import Synchronization

/// An outbound request whose failure says whether the request had left whole.
///
/// For a destination that does not deduplicate (the S2S vendors), a failure after the
/// request was sent is not an outage: the vendor may have counted the event and only its
/// answer was lost, and sending it again would count it twice. AsyncHTTPClient's async
/// API does not tell the two apart; its delegate API does.
public enum SentExchange {
    /// The answer: its status, headers, and up to the limit of its body.
    public struct Answer: Sendable {
        public let status: Int
        public let headers: HTTPHeaders
        public let body: ByteBuffer
        /// False when the body stopped before its end (the timeout came first): a decision
        /// that reads the body cannot be made from it.
        public let complete: Bool
    }

    /// The request failed; `sent` when it had been written whole before it did.
    public struct Failure: Error, CustomStringConvertible {
        public let sent: Bool
        public let underlying: any Error
        public var description: String { OutboundFailure.describe(underlying) }
    }

    /// Sends `request` and reads its answer, all within `timeout`.
    public static func exchange(
        _ request: HTTPClient.Request, on client: HTTPClient, timeout: Duration, bodyLimit: Int
    ) async throws(Failure) -> Answer {
        let delegate = Delegate(bodyLimit: bodyLimit)
        let (seconds, attoseconds) = timeout.components
        let deadline = NIODeadline.now() + .nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
        do {
            return try await client.execute(request: request, delegate: delegate, deadline: deadline).get()
        } catch {
            // The destination answered and its body did not follow in time: the answer is
            // its status, as with every other outbound call.
            if let answered = delegate.answered { return answered }
            throw Failure(sent: delegate.sent, underlying: error)
        }
    }

    final class Delegate: HTTPClientResponseDelegate {
        typealias Response = Answer

        struct State {
            var sent = false
            var head: HTTPResponseHead?
            var body = ByteBuffer()
        }

        let bodyLimit: Int
        private let state = Mutex(State())

        init(bodyLimit: Int) {
            self.bodyLimit = bodyLimit
        }

        var sent: Bool { state.withLock { $0.sent } }

        /// The answer's head and what came of its body, once the head has arrived.
        var answered: Answer? {
            state.withLock { state in
                state.head.map {
                    Answer(status: Int($0.status.code), headers: $0.headers, body: state.body, complete: false)
                }
            }
        }

        /// Sent from the moment its head went out, not once its last byte is written: a
        /// deadline between the bytes leaving and that callback would count a request the
        /// vendor had whole as unsent, and send it again. A request cut
        /// off after its head is counted as sent too: a dead letter to check, never a
        /// second copy.
        func didSendRequestHead(task: HTTPClient.Task<Answer>, _ head: HTTPRequestHead) {
            state.withLock { $0.sent = true }
        }

        func didReceiveHead(task: HTTPClient.Task<Answer>, _ head: HTTPResponseHead) -> EventLoopFuture<Void> {
            state.withLock { $0.head = head }
            return task.eventLoop.makeSucceededVoidFuture()
        }

        /// Past the limit the rest is read and dropped: the answer is its status and the
        /// start of its body, and the connection stays usable.
        func didReceiveBodyPart(task: HTTPClient.Task<Answer>, _ buffer: ByteBuffer) -> EventLoopFuture<Void> {
            state.withLock { state in
                var part = buffer
                let room = max(0, bodyLimit - state.body.readableBytes)
                if let kept = part.readSlice(length: min(room, part.readableBytes)) {
                    state.body.writeImmutableBuffer(kept)
                }
            }
            return task.eventLoop.makeSucceededVoidFuture()
        }

        func didFinishRequest(task: HTTPClient.Task<Answer>) throws -> Answer {
            try state.withLock { state in
                guard let head = state.head else { throw HTTPClientError.remoteConnectionClosed }
                return Answer(status: Int(head.status.code), headers: head.headers, body: state.body, complete: true)
            }
        }
    }
}
