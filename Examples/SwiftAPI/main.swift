// A tour of the Swift API: a source, two interceptors, a manager, and its outputs.
//
//     swift run paging-example
import Paging

/// Pages of repository names, 5 a page, 4 pages; an API would fetch them over the network.
struct RepoNames: PagingSource {
    let refreshKey = 0

    func keyChain(for key: Int) -> PagingKeyChain<Int> {
        PagingKeyChain(key: key, prevKey: key > 0 ? key - 1 : nil, nextKey: key < 3 ? key + 1 : nil)
    }

    func fetch(request: PagingRequest<Int>) async throws -> Page<Int, String> {
        let first = request.key * request.params.pageSize
        let names = (first ..< first + request.params.pageSize).map { "repo-\($0)" }
        return Page(request: request, values: names)
    }
}

let manager = PaginationManager(
    source: RepoNames(),
    pageSize: 5,
    interceptors: [
        LoggingInterceptor(minimumLevel: .info) { level, message in print("  log[\(level)] \(message)") },
        CacheInterceptor(timeToLive: .seconds(60), maxEntries: 100),
    ]
)

// Watch the outputs as an app's view model would.
let outputs = manager.outputs()
let watcher = Task {
    for await output in outputs {
        print("output: \(output.values.count) values, refreshing: \(output.isRefreshing), "
              + "appending: \(output.isAppending), append: \(output.appendState)")
    }
}

await manager.refresh().value
while !manager.output.appendState.isEndReached {
    await manager.append().value
}
print("loaded: \(manager.output.values.joined(separator: " "))")
watcher.cancel()
await watcher.value
