import Glibc
import SpindleExamplesKit

// `spindle-examples --list` lists the examples; `spindle-examples NAME` runs one; no argument runs them all.

func usage() -> String {
    "usage: spindle-examples [--list | NAME]  (no argument runs every example)"
}

func padded(_ text: String, to width: Int) -> String {
    text.count >= width ? text + " " : text + String(repeating: " ", count: width - text.count)
}

func run(_ example: SpindleExample, output: PrintingOutput) -> Bool {
    output.line("== \(example.name) (\(example.source)): \(example.summary)")
    do {
        try example.run(output)
        return true
    } catch {
        output.line("!! \(example.name) failed: \(error)")
        return false
    }
}

let arguments = Array(CommandLine.arguments.dropFirst())
let output = PrintingOutput()
let errors = PrintingOutput(descriptor: 2)

switch arguments {
case []:
    var failed: [String] = []
    for example in SpindleExamples.all where !run(example, output: output) { failed.append(example.name) }
    output.line(failed.isEmpty
        ? "== all \(SpindleExamples.all.count) examples ran"
        : "== \(failed.count) of \(SpindleExamples.all.count) examples failed: \(failed.joined(separator: ", "))")
    exit(failed.isEmpty ? 0 : 1)
case ["--list"]:
    let width = SpindleExamples.all.map(\.name.count).max() ?? 0
    let sourceWidth = SpindleExamples.all.map(\.source.count).max() ?? 0
    for example in SpindleExamples.all {
        output.line(padded(example.name, to: width + 2) + padded(example.source, to: sourceWidth + 2) + example.summary)
    }
case ["--help"], ["-h"]:
    output.line(usage())
case _ where arguments.count == 1:
    let name = arguments[0]
    guard let example = SpindleExamples.named(name) else {
        errors.line("spindle-examples: no example named '\(name)' (see --list)")
        errors.line(usage())
        exit(2)
    }
    exit(run(example, output: output) ? 0 : 1)
default:
    errors.line(usage())
    exit(2)
}
