"""Where a batch's time goes, one line per phase, from the batches' ``phases_ms``
(``streamtide.engine.progress.PHASES``) and the writes ``bench.io_counts`` counted."""

from __future__ import annotations

#: (label, the phases that make it up, what they are summed over: None for the driver's)
LINES = (
    ("the whole batch (its duration)", ("batch",), None),
    ("driver planning", ("plan",), None),
    ("sending and waiting (run - longest work unit)", ("run", "-unit.longest"), None),
    ("opening and restoring", ("task.restore",), "tasks"),
    ("reading", ("task.read",), "tasks"),
    ("processing", ("task.process",), "tasks"),
    ("the stores' commit", ("task.commit",), "tasks"),
    ("segment writes and fsyncs (Kafka: the transaction)", ("task.write",), "tasks"),
    ("closing", ("task.close",), "tasks"),
    ("sealing (prepare, seals, seal record)", ("seal",), None),
    ("commit record", ("commit",), None),
    ("settling (work units, before the next run)", ("unit.settle",), "work units"),
)


def phase_ms(phases: dict[str, float], parts: tuple[str, ...]) -> float:
    """The sum of ``parts`` (a leading ``-`` subtracts)."""
    total = 0.0
    for part in parts:
        sign = -1.0 if part.startswith("-") else 1.0
        total += sign * phases.get(part.lstrip("-"), 0.0)
    return total


def phase_lines(
    phases: dict[str, float], writes: dict[str, float] | None = None, slots: int = 1
) -> list[str]:
    """The mean batch's phases as lines: the driver's in wall time, the tasks' summed over
    the batch's tasks with the share of one of ``slots`` work units running in parallel."""
    lines = []
    for label, parts, summed in LINES:
        if not any(p.lstrip("-") in phases for p in parts):
            continue
        ms = phase_ms(phases, parts)
        extra = f" (summed over {summed}; {ms / slots:,.1f} ms per work unit)" if summed else ""
        lines.append(f"{label:<54}{ms:>9,.1f} ms{extra}")
    if writes:
        lines.append("writes per batch: " + write_summary(writes))
    return lines


def write_summary(writes: dict[str, float]) -> str:
    """The counted writes of one batch (or one task) in a line."""

    def n(name: str) -> float:
        return writes.get(name, 0)

    return (
        f"{n('fsync'):,.1f} fsyncs ({n('fsync_us') / 1000:,.1f} ms: segments "
        f"{n('fsync.segment'):,.1f}, manifest {n('fsync.manifest'):,.1f}, directories "
        f"{n('fsync.directory'):,.1f}, store checkpoints {n('fsync.store_checkpoint'):,.1f}, "
        f"application directory {n('fsync.app_dir'):,.1f}), {n('segment_files'):,.1f} segment "
        f"files ({n('segment_bytes') / 1024:,.1f} KiB), {n('manifest_entries'):,.1f} manifest "
        f"entries, {n('head_writes'):,.1f} head/meta files, {n('log_checkpoints'):,.1f} log "
        f"checkpoints, {n('store_checkpoints'):,.1f} store checkpoints, "
        f"{n('app_dir_records'):,.1f} application-directory records, "
        f"{n('rocksdb_write_batches'):,.1f} RocksDB write batches "
        f"(+{n('rocksdb_puts'):,.1f} single puts, {n('rocksdb_wal_syncs'):,.1f} WAL syncs), "
        f"{n('kafka_task_commits'):,.1f} Kafka commits (Kafka: {n('kafka_producers'):,.1f} "
        f"producers created, {n('kafka_transactions'):,.1f} transactions, "
        f"{n('kafka_offset_sends'):,.1f} offset sends, {n('kafka_offset_fetches'):,.1f} offset "
        "reads), "
        f"{n('messages_sent'):,.1f} control messages"
    )


def slots_of(master: str) -> int:
    """Executor slots of a ``local[N]`` master (1 for anything else): work units in parallel."""
    inside = master.partition("[")[2].rstrip("]")
    return int(inside) if inside.isdigit() else 1
