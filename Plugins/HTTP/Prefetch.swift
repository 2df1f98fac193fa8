// The next page, fetched while the current one is handed out: when a page's next key is known,
// its request goes out at once, and the fetch that asks for it next finds the response there
// (and completes on its own thread, without waiting for the network) or waits for it.
import Synchronization

/// A response kept past its transfer's callback (a page fetched ahead): a 2xx, its headers, a
/// copy of its body, and the scan of that body.
///
/// The body is scanned when it comes, on the transfer's thread, while the fetch that will ask
/// for it is still busy with the page before: the scan is then off that fetch's path.
final class StoredResponse: @unchecked Sendable {
    let status: Int
    let headers: [(name: String, value: String)]
    private let body: UnsafeMutableBufferPointer<UInt8>
    private let scan: Result<BodyScan, ScanError>

    init(_ response: TransportResponse, scannedWith plan: ScanPlan) {
        status = response.status
        headers = response.headers
        let body = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: response.body.count)
        _ = body.initialize(from: response.body)
        self.body = body
        scan = Result { () throws(ScanError) in try plan.scan(UnsafeBufferPointer(body)) }
    }

    deinit {
        body.deallocate()
    }

    /// The response and its scan, valid during `use` only (they point into this copy).
    func withResponse<R>(_ use: (TransportResponse) -> R) -> R {
        var response = TransportResponse(status: status, headers: headers, body: UnsafeBufferPointer(body))
        response.scanned = scan
        return withExtendedLifetime(self) { use(response) }
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

    /// What to do with the response ahead for `url`, which just came.
    enum Arrival {
        /// A fetch claimed it already: give it the response (or send its request again).
        case waiter(Waiter)
        /// Nobody asked yet: make the copy to keep, then `store` it.
        case keep
        /// Nothing to keep (not the request ahead, or no usable response).
        case drop
    }

    /// The request ahead for `url` ended, with a usable response or not. Outside the lock, the
    /// caller then copies and scans a response to `keep`: a fetch that claims it meanwhile
    /// waits for `store`.
    func arrived(url: String, usable: Bool) -> Arrival {
        state.withLock { ahead in
            guard let current = ahead, current.url == url else { return .drop }
            if let waiter = current.waiter {
                ahead = nil
                return .waiter(waiter)
            }
            guard usable else {
                ahead = nil
                return .drop
            }
            return .keep
        }
    }

    /// Keeps `response` for its claimer; returns the fetch that claimed it while it was being
    /// made, if one did (it gets `response` now).
    func store(url: String, _ response: StoredResponse) -> Waiter? {
        state.withLock { ahead in
            guard let current = ahead, current.url == url else { return nil }
            if let waiter = current.waiter {
                ahead = nil
                return waiter
            }
            ahead?.response = response
            return nil
        }
    }
}
