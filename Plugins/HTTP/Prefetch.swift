// The next pages, fetched while the current one is handed out: when a page's next key is known,
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
    let headersNotUTF8: Set<String>
    private let body: UnsafeMutableBufferPointer<UInt8>
    private let scan: Result<BodyScan, ScanError>
    /// The page's keys, found once the scan is made (before the response is stored: then only
    /// read).
    var keys: KeysAhead?

    init(_ response: TransportResponse, scannedWith plan: ScanPlan) {
        status = response.status
        headers = response.headers
        headersNotUTF8 = response.headersNotUTF8
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
        var response = TransportResponse(status: status, headers: headers, headersNotUTF8: headersNotUTF8, body: UnsafeBufferPointer(body))
        response.scanned = scan
        response.keysAhead = keys
        return withExtendedLifetime(self) { use(response) }
    }
}

/// The pages fetched ahead of an instance, oldest first, and the fetch waiting for the oldest,
/// if any. Each request ahead is for the page after the one before it, and one goes out at a
/// time: the page after an unclaimed response is asked for when that response comes (up to
/// `depth` pages ahead), so that the requests keep going while the fetches that hand pages out
/// are busy, without a thread switch to start each one.
///
/// # Thread safety
/// Every method may be called from any thread; state is kept under a lock.
final class Prefetcher<Waiter: Sendable>: Sendable {
    private struct Ahead {
        var url: String
        var body: [UInt8]?
        var transfer: UInt64?
        var response: StoredResponse?
        /// The key of the page after this one, known once its response came (nil: none to fetch).
        var next: [UInt8]?
        var waiter: Waiter?
        /// When the response came.
        var arrived: ContinuousClock.Instant?
    }

    enum Claim {
        /// Nothing fetched ahead for this request: fetch it.
        case none
        /// The response came: use it.
        case ready(StoredResponse)
        /// It is on its way: the waiter gets it.
        case waiting
    }

    /// The most pages ahead.
    let depth: Int
    /// The longest a response ahead waits to be claimed.
    let maxAge: Duration
    private let state = Mutex<[Ahead]>([])

    init(depth: Int, maxAge: Duration) {
        self.depth = depth
        self.maxAge = maxAge
    }

    /// Claims what was fetched ahead for `url` and `body`; when that is not the oldest page
    /// ahead, or its response is older than `maxAge`, every page ahead is dropped, and the
    /// transfers still running are returned to cancel.
    func claim(url: String, body: [UInt8]?, waiter: Waiter) -> (Claim, cancel: [UInt64]) {
        state.withLock { queue in
            guard let oldest = queue.first else { return (.none, []) }
            // Claimed already: it stays its waiter's.
            guard oldest.waiter == nil else { return (.none, []) }
            let stale = oldest.arrived.map { .now - $0 > maxAge } ?? false
            guard oldest.url == url, oldest.body == body, !stale else {
                let running = queue.compactMap { $0.response == nil ? $0.transfer : nil }
                queue = []
                return (.none, running)
            }
            if let response = oldest.response {
                queue.removeFirst()
                return (.ready(response), [])
            }
            queue[0].waiter = waiter
            return (.waiting, [])
        }
    }

    /// Records a request about to go out ahead; false when `depth` pages are ahead already or
    /// this one is among them.
    func begin(url: String, body: [UInt8]?) -> Bool {
        state.withLock { queue in
            guard queue.count < depth, !queue.contains(where: { $0.url == url && $0.body == body }) else { return false }
            queue.append(Ahead(url: url, body: body))
            return true
        }
    }

    /// Records the transfer of the request ahead for `url` (to cancel it if it is not claimed).
    func attach(url: String, transfer: UInt64) {
        state.withLock { queue in
            if let index = queue.firstIndex(where: { $0.url == url }) { queue[index].transfer = transfer }
        }
    }

    /// What to do with the response ahead for `url`, which just came.
    enum Arrival {
        /// A fetch claimed it already: give it the response (or send its request again).
        case waiter(Waiter)
        /// Nobody asked yet: make the copy to keep, then `store` it.
        case keep
        /// Nothing to keep (not a request ahead, or no usable response).
        case drop
    }

    /// The request ahead for `url` ended, with a usable response or not. Outside the lock, the
    /// caller then copies and scans a response to `keep`: a fetch that claims it meanwhile
    /// waits for `store`. (No page is ahead after one without a response: its request goes out
    /// when that response is stored.)
    func arrived(url: String, usable: Bool) -> Arrival {
        state.withLock { queue in
            guard let index = queue.firstIndex(where: { $0.url == url }) else { return .drop }
            if let waiter = queue[index].waiter {
                queue.remove(at: index)
                return .waiter(waiter)
            }
            guard usable else {
                queue.remove(at: index)
                return .drop
            }
            return .keep
        }
    }

    /// Keeps `response`, and the key of the page after it, for its claimer; returns the fetch
    /// that claimed it while it was being made, if one did (it gets `response` now).
    func store(url: String, _ response: StoredResponse, next: [UInt8]?) -> Waiter? {
        state.withLock { queue in
            guard let index = queue.firstIndex(where: { $0.url == url }) else { return nil }
            if let waiter = queue[index].waiter {
                queue.remove(at: index)
                return waiter
            }
            queue[index].response = response
            queue[index].next = next
            queue[index].arrived = .now
            return nil
        }
    }

    /// The key of the page to fetch ahead now: `next` (the page after the one just handed out)
    /// when nothing is ahead, else the page after the newest one ahead once its response came;
    /// nil when `depth` pages are ahead.
    func keyToFetch(after next: [UInt8]?) -> [UInt8]? {
        state.withLock { queue in
            guard queue.count < depth else { return nil }
            guard let newest = queue.last else { return next }
            return newest.response == nil ? nil : newest.next
        }
    }
}
