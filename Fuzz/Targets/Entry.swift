// The one fuzz executable, `e3dbkit-fuzz`, built two ways from the same sources:
//
// - by `swift build` with the rest of the package (and so by the test build): a replay tool.
//   `e3dbkit-fuzz TARGET FILE…` runs each file once through TARGET and exits non-zero on the first invariant
//   violation (a trap, like under libFuzzer). The FuzzReplayTests suite replays every corpus and FailCase this way.
// - by Fuzz/run.sh with `--sanitize=fuzzer -Xswiftc -sanitize=fuzzer,address -Xswiftc -DE3DB_LIBFUZZER`: a libFuzzer
//   binary; libFuzzer provides `main`, and E3DB_FUZZ_TARGET names the target that LLVMFuzzerTestOneInput runs.
//
// Each target is one file in Fuzz/Targets (its invariants in its header), with a function taking the input bytes.
import Foundation

/// Every fuzz target by name (the name of its file, of its corpus directory and of its FailCases directory).
let fuzzTargets: [String: @Sendable (UnsafePointer<UInt8>, Int) -> CInt] = unsafe [
    "FuzzAPIBodies": { unsafe fuzzAPIBodies(UnsafeRawPointer($0), $1) },
    "FuzzAuthHeaders": { unsafe fuzzAuthHeaders(UnsafeRawPointer($0), $1) },
    "FuzzBLAKE2b": fuzzBLAKE2b,
    "FuzzBase64URL": fuzzBase64URL,
    "FuzzCanonicalJSON": fuzzCanonicalJSON,
    "FuzzDocuments": fuzzDocuments,
    "FuzzFileDecrypt": fuzzFileDecrypt,
    "FuzzFileRange": fuzzFileRange,
    "FuzzKeyHeader": fuzzKeyHeader,
    "FuzzKeys": fuzzKeys,
    "FuzzNDJSON": fuzzNDJSON,
    "FuzzPageCodec": fuzzPageCodec,
    "FuzzSQLiteExport": fuzzSQLiteExport,
    "FuzzSQLiteVFS": fuzzSQLiteVFS,
    "FuzzSealedBoxes": fuzzSealedBoxes,
    "FuzzSearchCost": { unsafe fuzzSearchCost(UnsafeRawPointer($0), $1) },
    "FuzzSecretStream": fuzzSecretStream,
    "FuzzServerRequests": { unsafe fuzzServerRequests(UnsafeRawPointer($0), $1) },
    "FuzzStore": fuzzStore,
    "FuzzTSV1Verify": { unsafe fuzzTSV1Verify(UnsafeRawPointer($0), $1) },
]

/// The target LLVMFuzzerTestOneInput runs: the one E3DB_FUZZ_TARGET names.
private let selectedTarget: @Sendable (UnsafePointer<UInt8>, Int) -> CInt = {
    let name = ProcessInfo.processInfo.environment["E3DB_FUZZ_TARGET"] ?? ""
    guard let body = unsafe fuzzTargets[name] else {
        FileHandle.standardError.write(
            Data(
                unsafe "E3DB_FUZZ_TARGET must name a target: \(fuzzTargets.keys.sorted().joined(separator: " "))\n".utf8
            ))
        exit(2)
    }
    return unsafe body
}()

@_cdecl("LLVMFuzzerTestOneInput")
public func testOneInput(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    unsafe selectedTarget(data, size)
}

#if !E3DB_LIBFUZZER
    /// The replay tool (the regular build). Exit status 0 when every file ran, 2 on usage errors; a violated invariant
    /// traps, as it does under libFuzzer.
    @main
    enum Replay {
        static func main() {
            let arguments = CommandLine.arguments.dropFirst()
            guard let name = arguments.first, let body = unsafe fuzzTargets[name] else {
                FileHandle.standardError.write(
                    Data(
                        unsafe "usage: e3dbkit-fuzz TARGET FILE…  (targets: \(fuzzTargets.keys.sorted().joined(separator: " ")))\n"
                            .utf8))
                exit(2)
            }
            var count = 0
            for path in arguments.dropFirst() {
                guard let bytes = FileManager.default.contents(atPath: path) else {
                    FileHandle.standardError.write(Data("e3dbkit-fuzz: cannot read \(path)\n".utf8))
                    exit(2)
                }
                // libFuzzer hands a target a valid pointer even for an empty input; so does the replay.
                let input = [UInt8](bytes) + [0]
                _ = unsafe input.withUnsafeBufferPointer { buffer in
                    // The base address of a non-empty array is never nil.
                    guard let base = buffer.baseAddress else { return CInt(0) }
                    return unsafe body(base, bytes.count)
                }
                count += 1
            }
            print("\(name): \(count) inputs replayed")
        }
    }
#endif
