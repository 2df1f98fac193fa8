// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "SwiftPaging",
    products: [
        .library(name: "Paging", targets: ["Paging"]),
        .library(name: "PagingTesting", targets: ["PagingTesting"]),
        .library(name: "PagingHost", targets: ["PagingHost"]),
        .library(name: "PagingPluginKit", targets: ["PagingPluginKit"]),
        .executable(name: "pager", targets: ["pager"]),
        .library(name: "jsonlines", type: .dynamic, targets: ["PagingJSONLines"]),
        .library(name: "logging", type: .dynamic, targets: ["PagingLoggingPlugin"]),
        .library(name: "cache", type: .dynamic, targets: ["PagingCachePlugin"]),
        .library(name: "sqlite-store", type: .dynamic, targets: ["PagingSQLiteStore"]),
        .library(name: "http", type: .dynamic, targets: ["PagingHTTPPlugin"]),
    ],
    targets: [
        .target(name: "Paging"),
        .target(name: "LoopbackHTTP"),
        .target(name: "GitHubFixtureServer", dependencies: ["LoopbackHTTP"]),
        .target(name: "CPaging", path: "Sources/CPaging"),
        .target(name: "PagingHost", dependencies: ["Paging", "CPaging"]),
        .target(name: "PagingPluginKit", dependencies: ["CPaging"]),
        .executableTarget(name: "pager", dependencies: ["PagingHost"]),
        .target(name: "PagingJSONLines", dependencies: ["CPaging"], path: "Plugins/JSONLines"),
        .target(name: "PagingLoggingPlugin", dependencies: ["PagingPluginKit"], path: "Plugins/Logging"),
        .target(name: "PagingCachePlugin", dependencies: ["Paging", "PagingPluginKit"], path: "Plugins/Cache"),
        .target(name: "PagingSQLiteStore", dependencies: ["CPaging"], path: "Plugins/SQLite", linkerSettings: [.linkedLibrary("sqlite3")]),
        .target(name: "PagingHTTPPlugin", dependencies: ["PagingPluginKit"], path: "Plugins/HTTP"),
        .target(name: "PagingTesting", dependencies: ["Paging"]),
        .testTarget(name: "PagingTests", dependencies: ["Paging", "PagingTesting"]),
        .testTarget(name: "PagingHostTests", dependencies: ["PagingHost", "Paging", "PagingTesting"]),
        .testTarget(name: "LoopbackHTTPTests", dependencies: ["LoopbackHTTP", "GitHubFixtureServer"]),
        .testTarget(name: "PagingHTTPPluginTests", dependencies: ["PagingHost", "LoopbackHTTP", "GitHubFixtureServer"]),
        .executableTarget(name: "paging-example", dependencies: ["Paging"], path: "Examples/SwiftAPI"),
        .executableTarget(name: "github-fixture-server", dependencies: ["GitHubFixtureServer"], path: "Examples/GitHubRepos/FixtureServer"),
    ],
    swiftLanguageModes: [.v6]
)
