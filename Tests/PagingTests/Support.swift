import Paging
import PagingTesting
import Synchronization

/// Pages of consecutive integers: page n holds n*size ..< (n+1)*size.
func numberedPages(_ count: Int, size: Int = 3) -> [[Int]] {
    (0..<count).map { page in Array(page * size ..< (page + 1) * size) }
}

func params(pageSize: Int = 3, retry: RetryPolicy = .none, userInfo: [String: String] = [:]) -> PagingRequestParams {
    PagingRequestParams(pageSize: pageSize, retryPolicy: retry, userInfo: userInfo)
}

/// Records what interceptors see, in order, across tasks.
final class Journal: Sendable {
    private let entries = Locked<[String]>([])
    func add(_ entry: String) { entries.withLock { $0.append(entry) } }
    var all: [String] { entries.withLock { $0 } }
}

/// An interceptor that records its calls under a name.
struct RecordingInterceptor: PagingInterceptor {
    let name: String
    let journal: Journal
    var handleAfterwards = true
    /// Whether it records the failures it hears (`loadFailed`) too.
    var recordsFailures = false

    func intercept(request: PagingRequest<Int>) async throws -> PagingInterceptResult<Int, Int> {
        journal.add("\(name).intercept(\(request.key))")
        return .proceed(request, handleAfterwards: handleAfterwards)
    }

    func handle(page: Page<Int, Int>) async {
        journal.add("\(name).handle(\(page.key))")
    }

    func loadFailed(_ request: PagingRequest<Int>, error: any Error) async {
        if recordsFailures { journal.add("\(name).loadFailed(\(request.key), \(error))") }
    }
}

/// An interceptor whose handing back of the page at `key` waits until `open()` (a page on its
/// way back through the chain, held there).
final class GateInterceptor: PagingInterceptor, Sendable {
    let key: Int
    private let state = Locked<(reached: Bool, open: Bool, waiter: CheckedContinuation<Void, Never>?)>((false, false, nil))

    init(key: Int) { self.key = key }

    func intercept(request: PagingRequest<Int>) async throws -> PagingInterceptResult<Int, Int> {
        .proceed(request, handleAfterwards: true)
    }

    func transform(page: Page<Int, Int>) async throws -> Page<Int, Int> {
        guard page.key == key else { return page }
        await withCheckedContinuation { continuation in
            let resume = state.withLock { state -> Bool in
                state.reached = true
                if state.open { return true }
                state.waiter = continuation
                return false
            }
            if resume { continuation.resume() }
        }
        return page
    }

    var reached: Bool { state.withLock { $0.reached } }

    func open() {
        state.withLock { state -> CheckedContinuation<Void, Never>? in
            state.open = true
            defer { state.waiter = nil }
            return state.waiter
        }?.resume()
    }
}

/// Collects states from a pager's stream in the background.
final class StateCollector: Sendable {
    private final class States: Sendable {
        let list = Locked<[PagingState<Int, Int>]>([])
    }

    private let states = States()
    private let task: Task<Void, Never>

    init(_ stream: AsyncStream<PagingState<Int, Int>>) {
        task = Task { [states] in
            for await state in stream { states.list.withLock { $0.append(state) } }
        }
    }

    var all: [PagingState<Int, Int>] { states.list.withLock { $0 } }

    /// Waits until `predicate` holds for the collected states (or about 5 s pass).
    func wait(until predicate: ([PagingState<Int, Int>]) -> Bool) async -> [PagingState<Int, Int>] {
        for _ in 0..<5_000 {
            let current = all
            if predicate(current) { return current }
            try? await Task.sleep(for: .milliseconds(1))
        }
        return all
    }

    deinit { task.cancel() }
}

extension PagingState {
    /// A short label: "loading 1", "loaded 1", "failed 1", "cancelled 1", "retrying 1".
    var label: String {
        switch self {
        case .loading(let request): "loading \(request.key)"
        case .retrying(let request, _, _): "retrying \(request.key)"
        case .loaded(let page): "loaded \(page.key)"
        case .failed(let request, _): "failed \(request.key)"
        case .cancelled(let request): "cancelled \(request.key)"
        }
    }
}

/// Waits until `condition` holds, polling (a minute at most: a count of sleeps ran out while
/// the suite started, with every test running at once on 2 cores).
func eventually(_ condition: () -> Bool) async -> Bool {
    let until = ContinuousClock.now + .seconds(60)
    while !condition(), ContinuousClock.now < until, !Task.isCancelled {
        try? await Task.sleep(for: .milliseconds(1))
    }
    return condition()
}

/// The scripted source's pages, each value tagged with the request's query (user info "q"):
/// "q:value".
struct QueryTaggingSource: PagingSource {
    let scripted: ScriptedPagingSource<Int>

    var refreshKey: Int { scripted.refreshKey }

    func keyChain(for key: Int) -> PagingKeyChain<Int> { scripted.keyChain(for: key) }

    func fetch(request: PagingRequest<Int>) async throws -> Page<Int, String> {
        let page = try await scripted.fetch(request: request)
        let query = request.params.userInfo["q"] ?? ""
        return Page(request: request, values: page.values.map { "\(query):\($0)" }, prevKey: page.prevKey, nextKey: page.nextKey)
    }
}
