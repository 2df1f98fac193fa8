// The next page, fetched while the current one is handed out: when a page's next key is known,
// its request goes out at once, and the fetch that asks for it next finds the response there
// (and completes on its own thread, without waiting for the network) or waits for it.
import Synchronization

/// A response kept past its transfer's callback (a page fetched ahead): a 2xx, its headers and
/// a copy of its body.
final class StoredResponse: Sendable {
    let status: Int
    let headers: [(name: String, value: String)]
    let body: [UInt8]

    init(_ response: TransportResponse) {
        status = response.status
        headers = response.headers
        body = Array(response.body)
    }

    func withResponse<R>(_ use: (TransportResponse) -> R) -> R {
        body.withUnsafeBufferPointer { use(TransportResponse(status: status, headers: headers, body: $0)) }
    }
}

/// The one request fetched ahead of an instance, and the fetch waiting for it, if any.
///
/// # Thread safety
/// Every method may be called from any thread; state is kept under a lock.
final class Prefetcher<Waiter: Sendable>: Sendable {
    private struct Ahead {
        var url: String
        var body: [UInt8]?
        var transfer: UInt64?
        var response: StoredResponse?
        var waiter: Waiter?
    }

    enum Claim {
        /// Nothing fetched ahead for this request: fetch it.
        case none
        /// The response came: use it.
        case ready(StoredResponse)
        /// It is on its way: the waiter gets it.
        case waiting
    }

    private let state = Mutex<Ahead?>(nil)

    /// Claims what was fetched ahead for `url` and `body`; anything else fetched ahead is
    /// dropped, and its transfer returned to cancel.
    func claim(url: String, body: [UInt8]?, waiter: Waiter) -> (Claim, cancel: UInt64?) {
        state.withLock { ahead in
            guard let current = ahead else { return (.none, nil) }
            // Claimed already: it stays its waiter's.
            guard current.waiter == nil else { return (.none, nil) }
            guard current.url == url, current.body == body else {
                ahead = nil
                return (.none, current.response == nil ? current.transfer : nil)
            }
            if let response = current.response {
                ahead = nil
                return (.ready(response), nil)
            }
            ahead?.waiter = waiter
            return (.waiting, nil)
        }
    }

    /// Records a request about to go out ahead; false when one is already ahead.
    func begin(url: String, body: [UInt8]?) -> Bool {
        state.withLock { ahead in
            guard ahead == nil else { return false }
            ahead = Ahead(url: url, body: body)
            return true
        }
    }

    /// Records the transfer of the request ahead for `url` (to cancel it if it is not claimed).
    func attach(url: String, transfer: UInt64) {
        state.withLock { ahead in
            if ahead?.url == url { ahead?.transfer = transfer }
        }
    }

    /// The request ahead for `url` ended: returns the fetch waiting for it, if one claimed it
    /// already; else `keep` (nil: nothing usable came) makes the copy kept for its claimer.
    func finish(url: String, keep: (() -> StoredResponse)?) -> Waiter? {
        state.withLock { ahead in
            guard let current = ahead, current.url == url else { return nil }
            if let waiter = current.waiter {
                ahead = nil
                return waiter
            }
            if let keep {
                ahead?.response = keep()
            } else {
                ahead = nil
            }
            return nil
        }
    }
}
