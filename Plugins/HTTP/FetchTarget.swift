// What one fetch asks for: the URL of a request's key, by the pagination type.
import CPaging
import PagingPluginKit

/// What one fetch asks for: the URL, and the numeric key for page and offset pagination.
struct FetchTarget: Sendable {
    var url: String
    var key: String
    var number: Int
    var pageSize: Int
    /// The key as the cycle check knows it: for link pagination the URL fetched (the refresh
    /// key "" stands for the expanded template), its secrets as references, else the key.
    var chainKey: String
    /// The walk the cycle check follows the key in (``KeyChains``): the page size and the
    /// params, but for how to load (hard_refresh, reload).
    var walk: String
    /// The POST body, when the config has a body template.
    var body: [UInt8]?
    /// Whether the url is the config's template filled in (not a URL a page linked to).
    var isFromTemplate = true
    /// The URL with the OAuth2 token filled in where the key holds it as a reference
    /// (``HTTPSourcePlugin/tokenReference``), or nil when it holds none. Only the key's: the
    /// parameters' text never is (a client's "${oauth2:access_token}" was sent as the token).
    private var fillingToken: (@Sendable (String) -> String)?

    init(_ request: PagingPluginRequest, config: HTTPSourceConfig) throws(PluginFailure) {
        key = request.keyText
        pageSize = request.pageSize
        number = 0
        var text: String
        var offset: Int?
        switch config.pagination {
        case .page(let first), .offset(let first):
            if key.isEmpty {
                number = first
            } else {
                guard let parsed = Int(key), parsed >= 0 else {
                    throw .invalidRequest("key \"\(key)\" is not a \(config.pagination.typeName == "page" ? "page number" : "offset")")
                }
                number = parsed
            }
            let isPage = config.pagination.typeName == "page"
            offset = try Self.offset(key: key, number: number, first: first, pageSize: pageSize, isPage: isPage)
            key = String(number)
            text = config.url.expand(key: key, pageSize: pageSize, offset: offset, params: request.params)
        case .cursor, .header:
            // A key holds the config's secrets as references (hidingSecrets), filled in for a
            // trusted host; the parameters never are (a client's "${TOKEN}" was, and the server
            // echoed the secret back).
            text = config.url.expand(key: key, pageSize: pageSize, offset: nil, params: request.params)
            let revealed = config.revealed(key)
            let sent = revealed != key && config.isTrusted(text) ? revealed : key
            if sent != key { text = config.url.expand(key: sent, pageSize: pageSize, offset: nil, params: request.params) }
            fillingToken = Self.tokenFilling(key: sent, config, pageSize: pageSize, params: request.params)
        case .link, .nextURL:
            if ResponseParsing.startsIgnoringCase(key.utf8, with: "http://") || ResponseParsing.startsIgnoringCase(key.utf8, with: "https://") {
                let link = config.revealingSecrets(key)
                text = link
                isFromTemplate = false
                if Self.holdsToken(link) { fillingToken = { token in fillingIn(link, reference: HTTPSourcePlugin.tokenReference, with: token) } }
            } else {
                text = config.url.expand(key: key, pageSize: pageSize, offset: nil, params: request.params)
                fillingToken = Self.tokenFilling(key: key, config, pageSize: pageSize, params: request.params)
            }
        }
        if let (placeholder, value) = config.url.dotSegment(key: key, params: request.params) {
            throw .invalidRequest("\(placeholder) is \"\(value)\" in the url's path, which would take the request to another path")
        }
        url = text
        // Keys that are URLs hold the url's secrets as references (hidingSecrets): so does the chain.
        chainKey = config.pagination.keysAreURLs ? config.hidingSecrets(text) ?? text : key
        walk = request.params.keys.sorted().reduce(into: String(pageSize)) { walk, name in
            guard name != "hard_refresh", name != "reload", let value = request.params[name] else { return }
            walk += "\u{0}\(name)=\(value)"
        }
        body = config.bodyTemplate.map { template in
            // The body goes where the URL does: its key's references filled in for a trusted host.
            let bodyKey = config.pagination.keysAreURLs ? "" : config.isTrusted(text) ? config.revealed(key) : key
            return template.render(key: bodyKey, pageSize: pageSize, offset: offset, params: request.params)
        }
    }

    /// The URL to send with the OAuth2 token `token` (to a trusted host).
    func url(token: String) -> String {
        fillingToken?(token) ?? url
    }

    private static func holdsToken(_ text: String) -> Bool {
        fillingIn(text, reference: HTTPSourcePlugin.tokenReference, with: "") != text
    }

    /// The url template expanded with `key`, the token filled in where `key` holds its reference.
    private static func tokenFilling(key: String, _ config: HTTPSourceConfig, pageSize: Int, params: [String: String]) -> (@Sendable (String) -> String)? {
        guard holdsToken(key) else { return nil }
        let template = config.url
        return { token in
            template.expand(key: fillingIn(key, reference: HTTPSourcePlugin.tokenReference, with: token), pageSize: pageSize, offset: nil, params: params)
        }
    }

    /// The `{offset}` of a page or offset key, refusing a key from outside (a store, a caller)
    /// whose offset, or the key of the page after it, a 64-bit integer cannot hold.
    static func offset(key: String, number: Int, first: Int, pageSize: Int, isPage: Bool) throws(PluginFailure) -> Int {
        let offset: Int, next: (partialValue: Int, overflow: Bool)
        if isPage {
            let product = max(0, number - first).multipliedReportingOverflow(by: pageSize)
            guard !product.overflow else {
                throw .invalidRequest("key \"\(key)\" is too large: its offset ((key - \(first)) x page size \(pageSize)) overflows a 64-bit integer")
            }
            offset = product.partialValue
            next = number.addingReportingOverflow(1)
        } else {
            offset = number
            next = number.addingReportingOverflow(pageSize)
        }
        guard !next.overflow else {
            throw .invalidRequest("key \"\(key)\" is too large: the key after it overflows a 64-bit integer")
        }
        return offset
    }
}

