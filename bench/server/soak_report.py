"""The soak benchmark's report (soak.py): the figures of a finished run, and
the goals checked on them; a missed goal is added to the soak's failures."""
import collections
import statistics

# The daemon keeps the last 64 results (about 130 KiB each for small_cnn); its RSS
# levels off after about twice that many distinct results, once the allocator
# reuses what evicted results freed. Only a warm-up that long makes RSS comparable.
FULL_CACHE_RESULTS = 150


def report(soak):
    """Prints the report of a Soak after its finish()."""
    if not hasattr(soak, "end"):
        print("wavecast serve soak: the run did not finish\n" +
              "\n".join("  MISSED: " + failure for failure in soak.failures), flush=True)
        return
    args = soak.args
    out = []
    out.append(f"wavecast serve soak: {args.minutes:g} min of load ({soak.wall_s:.0f} s with "
               f"pauses) after {args.warmup_results} warm-up results "
               f"({soak.warmup_fill_s:.0f} s), seed {args.seed}, debounce "
               f"{args.debounce_ms} ms, {args.sample}")
    saves = sum(soak.saves.values())
    out.append(f"saves: {saves} ({', '.join(f'{v} {k}' for k, v in soak.saves.items())})")
    counts = collections.Counter()
    for client in soak.docs:
        counts.update(client.counts)
    sent = {k[5:]: v for k, v in counts.items() if k.startswith("sent ")}
    out.append("requests (sent: answered / cancelled with -32800 / expected error):")
    for method in sorted(sent):
        out.append(f"  {method:26} {sent[method]:5}: {counts['answered ' + method]} / "
                   f"{counts['cancelled ' + method]} / {counts['expected error ' + method]}"
                   + (f" ({counts['answered before its cancel ' + method]} answered before "
                      f"their cancel arrived)" if counts['answered before its cancel ' +
                                                         method] else ""))
    out.append("churn connections: " + ", ".join(f"{v} {k}" for k, v in soak.churn.items()))
    out.append("quiet points (label, RSS MiB, fds, threads, children, zombies):")
    for label, rss, fds, threads, children, zombies in soak.quiet_points:
        out.append(f"  {label:14} {rss / 1024:8.1f} {fds:5} {threads:4} {children:3} "
                   f"{zombies:3}")
    after = [s for s in soak.samples if s[0] >= soak.warmup_s]
    base = soak.quiet_points[0][1]
    if after:
        rss = [s[1] for s in after]
        fds = [s[2] for s in after]
        out.append(f"RSS after warm-up: base {base / 1024:.1f} MiB, samples min "
                   f"{min(rss) / 1024:.1f} / median {statistics.median(rss) / 1024:.1f} / max "
                   f"{max(rss) / 1024:.1f} MiB, end {soak.end[1] / 1024:.1f} MiB "
                   f"({100 * (soak.end[1] - base) / base:+.1f}%); fds under load "
                   f"{min(fds)}..{max(fds)}")
        checked = args.warmup_results >= FULL_CACHE_RESULTS
        if not checked:
            out.append(f"RSS NOT CHECKED: a warm-up of {args.warmup_results} results does "
                       f"not fill the result cache (--warmup-results {FULL_CACHE_RESULTS})")
        for value, what in ((min(rss), "lowest"), (max(rss), "highest"),
                            (soak.end[1], "end")):
            if checked and abs(value - base) > 0.10 * base:
                soak.failures.append(f"RSS {what} {value / 1024:.1f} MiB is more than 10% "
                                     f"from {base / 1024:.1f} MiB after warm-up")
    first = soak.quiet_points[0]
    for index, what in ((2, "file descriptors"), (3, "threads"), (4, "child processes")):
        if soak.end[index] > first[index]:
            soak.failures.append(f"{what}: {first[index]} after warm-up, {soak.end[index]} "
                                 f"at the end")
    if any(point[5] for point in soak.quiet_points):
        soak.failures.append("zombie worker processes at a quiet point")
    out.append("recovery (what, error kind, failure reported after s, failure -> good "
               "result s, that analysis s):")
    for what, kind, reported, recovered, took in soak.recoveries:
        out.append(f"  {what:28} {kind or '-':15} {reported:6.2f} {recovered:7.2f} "
                   f"{took:7.2f}")
    if saves < args.saves * 0.99:
        soak.failures.append(f"only {saves} of {args.saves} saves were made")
    out.append("RESULT: " + ("all goals met" if not soak.failures else
                             f"{len(soak.failures)} goal(s) missed"))
    for failure in soak.failures[:50]:
        out.append("  MISSED: " + failure)
    print("\n".join(out), flush=True)
