// swift-tools-version:6.0
// librequestqueue: queues of concurrent asynchronous HTTP requests on libcurl, with a C API.
// Build the shared library with `scripts/build-lib` (it adds the SONAME and the rq_*-only export
// list); `swift build` / `swift test` work as usual for development.
import PackageDescription

let package = Package(
    name: "RequestQueue",
    products: [
        .library(name: "requestqueue", type: .dynamic, targets: ["RequestQueue"]),
    ],
    targets: [
        // libcurl, with typed wrappers around its variadic functions.
        .systemLibrary(
            name: "CCurl",
            path: "Sources/CCurl",
            pkgConfig: "libcurl",
            providers: [.apt(["libcurl4-openssl-dev"])]
        ),
        // The public header, so that the compiler checks every @c @implementation against it.
        .systemLibrary(name: "CRequestQueueAPI", path: "Sources/CRequestQueueAPI"),
        // The queue's logic: ordering, limits, duplicates, retry, input validation. No I/O.
        .target(name: "RequestQueueCore"),
        // The libcurl engine, callback delivery, handles and the C boundary.
        .target(
            name: "RequestQueue",
            dependencies: ["RequestQueueCore", "CCurl", "CRequestQueueAPI"],
            exclude: ["exports.map"]
        ),
        .testTarget(name: "RequestQueueCoreTests", dependencies: ["RequestQueueCore"]),
        .testTarget(
            name: "RequestQueueTests",
            dependencies: ["RequestQueue", "CRequestQueueAPI"]
        ),
    ],
    swiftLanguageModes: [.v5]
)
