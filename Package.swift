// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "SwiftPaging",
    products: [
        .library(name: "Paging", targets: ["Paging"]),
        .library(name: "PagingTesting", targets: ["PagingTesting"]),
    ],
    targets: [
        .target(name: "Paging"),
        .target(name: "PagingTesting", dependencies: ["Paging"]),
        .testTarget(name: "PagingTests", dependencies: ["Paging", "PagingTesting"]),
        .executableTarget(name: "paging-example", dependencies: ["Paging"], path: "Examples/SwiftAPI"),
    ],
    swiftLanguageModes: [.v6]
)
