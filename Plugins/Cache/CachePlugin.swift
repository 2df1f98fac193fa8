// The cache interceptor as a plugin: answers requests from the pages it has seen, for a time,
// up to a number of pages (least recently used evicted first), O(1) a request.
//
// Config:
//   ttl_seconds  how long a page is fresh (default 600)
//   max_entries  how many pages are kept (default 1000)
//   policy       "cache-first" (default: a fresh page answers, a stale one is loaded again),
//                "network-first" (every request is loaded; a held page answers only when the
//                load fails, with a warning) or "stale-while-revalidate" (a held page answers at
//                once; a stale one is then loaded again in the background)
// Pages are kept under the request's identity (key, page size, params but hard_refresh and
// reload). A request with the param hard_refresh = "true" goes to the source; its page, once
// loaded, replaces everything cached (a failed load leaves the cache as it was). One with the
// param reload = "true" (a short page loaded again) goes to the source too.
import Paging
import PagingPluginKit

final class CachePlugin: InterceptorPlugin {
    static let info = PluginInfo(
        id: "cache", name: "Cache", version: "1.0.0",
        description: "In-memory page cache with a time to live and an LRU bound", isThreadSafe: true)

    private let cache: CacheInterceptor<[UInt8], [UInt8]>

    init(host: PluginHost, config: PluginConfig) throws(PluginFailure) {
        try config.rejectUnknownKeys(["ttl_seconds", "max_entries", "policy"])
        let ttl = try config.positiveInt("ttl_seconds", default: 600, unit: "seconds")
        let maxEntries = try config.positiveInt("max_entries", default: 1_000, unit: "entries")
        let policyName = try config.string("policy") ?? FreshnessPolicy.cacheFirst.rawValue
        guard let policy = FreshnessPolicy(rawValue: policyName) else {
            throw .invalidConfig("policy: expected one of \(FreshnessPolicy.allCases.map { "\"\($0.rawValue)\"" }.joined(separator: ", ")), got \"\(policyName)\"")
        }
        cache = CacheInterceptor(timeToLive: .seconds(ttl), maxEntries: maxEntries, policy: policy)
    }

    func intercept(_ request: PagingPluginRequest) -> InterceptDecision {
        switch cache.answer(for: Self.request(request)) {
        case .proceed: .proceed(observe: true)
        case .complete(let page): .complete(Self.content(page))
        case .completeThenRevalidate(let page): .completeThenRevalidate(Self.content(page))
        case .proceedOrFallBack(_, let page, _): .proceedOrFallBack(Self.content(page))
        }
    }

    private static func content(_ page: Page<[UInt8], [UInt8]>) -> PageContent {
        PageContent(items: page.values, prevKey: page.prevKey, nextKey: page.nextKey,
                    isFirst: page.prevKey == nil, isLast: page.nextKey == nil, isShortened: page.isShortened,
                    isEmptiedByTransform: page.isEmptiedByTransform)
    }

    func handle(_ page: PagingPluginPage) {
        let content = page.content
        var kept = Page(request: Self.request(page.request), values: content.items,
                        prevKey: content.isFirst ? nil : content.prevKey,
                        nextKey: content.isLast ? nil : content.nextKey)
        kept.isShortened = content.isShortened
        kept.isEmptiedByTransform = content.isEmptiedByTransform
        cache.store(kept)
    }

    private static func request(_ request: PagingPluginRequest) -> PagingRequest<[UInt8]> {
        PagingRequest(kind: .append, keyChain: PagingKeyChain(key: request.key),
                      params: PagingRequestParams(pageSize: request.pageSize, userInfo: request.params))
    }
}

@c(paging_plugin_entry)
public func pagingPluginEntry() -> UnsafeRawPointer { PluginExport.entry(CachePlugin.self) }
