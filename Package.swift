// swift-tools-version:6.0
// librequestqueue: queues of concurrent asynchronous HTTP requests on libcurl, with a C API.
// Build the shared library with `scripts/build-lib` (it adds the SONAME and the rq_*-only export
// list); `swift build` / `swift test` work as usual for development.
import PackageDescription

// Release builds: specialize the Core's generics inside the library (cross-module optimization)
// and skip dynamic exclusivity checks on the hot paths (the code serializes access with locks).
let optimized: [SwiftSetting] = [
    .unsafeFlags(["-cross-module-optimization", "-enforce-exclusivity=unchecked"], .when(configuration: .release)),
]

// The library uses neither Swift concurrency nor regular expressions: without their implicit
// imports it does not load libswift_Concurrency, libswift_StringProcessing, libswift_RegexParser
// and libdispatch, about 1.6 MiB of resident memory in every process that loads it (bench/README.md,
// "Peak RSS"). CMakeLists.txt passes the same flags.
let lean: [SwiftSetting] = [
    .unsafeFlags(["-Xfrontend", "-disable-implicit-concurrency-module-import",
                  "-Xfrontend", "-disable-implicit-string-processing-module-import"]),
]

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
        .target(name: "RequestQueueCore", swiftSettings: optimized + lean),
        // The libcurl engine, callback delivery, handles and the C boundary.
        .target(
            name: "RequestQueue",
            dependencies: ["RequestQueueCore", "CCurl", "CRequestQueueAPI"],
            exclude: ["exports.map", "link-order.txt"],
            swiftSettings: optimized + lean
        ),
        .testTarget(name: "RequestQueueCoreTests", dependencies: ["RequestQueueCore"]),
        .testTarget(
            name: "RequestQueueTests",
            dependencies: ["RequestQueue", "CRequestQueueAPI"]
        ),
    ],
    swiftLanguageModes: [.v6]
)
