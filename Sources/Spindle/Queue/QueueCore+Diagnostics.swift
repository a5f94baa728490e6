/// `QueueCore`'s diagnostics: a readable summary of the queue under its lock (see `QueueCore` for the guards).
extension QueueCore {
    /// Settings, counts, and every member not yet running with what it waits on.
    func debugSummary() -> String {
        self.withAdmittedLock {
            var header = "SpindleOperationQueue '\(self.name)': width \(self.slots.limit) (requested \(self.slots.requestedLimit)), "
                + "\(self.slots.suspended ? "suspended" : "running"), members \(self.members.count), running \(self.slots.running), "
                + "ready \(self.ready.count), threads \(self.idle.threadCount) (parked \(self.idle.parked)), "
                + "held behind barriers \(self.barriers.heldCount), finished \(self.stats.finished)"
            header += " (cancelled \(self.stats.cancelled), failed \(self.stats.failed)), high water "
            header += "\(self.stats.highWaterMembers)/\(self.stats.highWaterRunning)"
            if let capacity = self.admission.capacity { header += ", capacity \(capacity) (\(self.admission.policy))" }
            var lines = [header]
            var node = self.members.first
            while let link = node {
                let op = link.takeUnretainedValue()
                let s = op.currentState
                var line = "  \(op.displayName): \(s.lifecycle)\(s.isCancelled ? ", cancelled" : "")"
                if s.lifecycle == .enqueued {
                    if op.placement == .held {
                        line += ", held behind a barrier"
                    } else if s.isScheduled {
                        line += ", ready (priority \(op.queuePriority))"
                    } else {
                        let waits = op.dependencies.filter { !$0.isFinished }.map(\.displayName)
                        let real = s.pendingDependencies - (s.hasGateHold ? 1 : 0)
                        line += ", waits on \(real): \(waits.joined(separator: ", "))"
                        if s.hasGateHold { line += ", \(op.gateSummary)" }
                    }
                    if s.propagatesFailure { line += ", cancels on a failed dependency" }
                    if let deadline = op.deadline { line += ", deadline in \(deadline.remaining)" }
                }
                lines.append(line)
                node = op.memberNext
            }
            for waiter in self.admission.producers ?? [] {
                let names = waiter.operations.prefix(4).map(\.displayName).joined(separator: ", ")
                lines.append("  blocked producer adding \(waiter.operations.count): \(names)"
                    + (waiter.operations.count > 4 ? ", …" : ""))
            }
            return lines.joined(separator: "\n")
        }
    }
}
