# Sourced by ci/test and ci/long: steps with a header line, a record of
# each (lane, name, start, end, outcome, free disk after it) and the table
# of them all at the end.
#
#   step "name" command args...        runs now, its output as it comes
#   lane_step "name" command args...   inside a background lane: output to
#                                      target/ci-logs/, its tail shown when
#                                      it ends (all of it up to 300 lines
#                                      if it failed)
#   steps_table                        the table of every step so far
#
# A foreground step that fails ends the run (set -e in the caller); a lane
# step that fails ends its lane, and the caller fails after waiting for it.

ci_start=${ci_start:-$SECONDS}
ci_logs=${ci_logs:-target/ci-logs}
ci_record=${ci_record:-$ci_logs/steps.tsv}
mkdir -p "$ci_logs"

free_disk() { df -Ph . | awk 'NR == 2 { print $4 }'; }
clock() {
    local s=$((SECONDS - ci_start))
    printf '%dm%02ds' $((s / 60)) $((s % 60))
}

# record LANE NAME START END OUTCOME
record() {
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$5" "$(free_disk)" >>"$ci_record"
}

step() {
    local name=$1 began=$((SECONDS - ci_start)) rc=0
    shift
    printf '\n==> [%s, %s free] %s\n' "$(clock)" "$(free_disk)" "$name"
    "$@" || rc=$?
    record "${ci_lane:-main}" "$name" "$began" $((SECONDS - ci_start)) "$([ "$rc" = 0 ] && echo ok || echo "FAILED ($rc)")"
    return "$rc"
}

lane_step() {
    local name=$1 began=$((SECONDS - ci_start)) rc=0 log
    shift
    log=$ci_logs/$(printf '%s' "$name" | tr -c 'a-zA-Z0-9' '-' | cut -c1-60).log
    printf '\n==> [%s, %s free] %s: %s (output in %s)\n' "$(clock)" "$(free_disk)" "$ci_lane" "$name" "$log"
    "$@" >"$log" 2>&1 || rc=$?
    record "$ci_lane" "$name" "$began" $((SECONDS - ci_start)) "$([ "$rc" = 0 ] && echo ok || echo "FAILED ($rc)")"
    if [ "$rc" = 0 ]; then
        printf '\n==> [%s] %s: %s passed; the end of its output:\n' "$(clock)" "$ci_lane" "$name"
        tail -n 12 "$log" | sed "s/^/    [$ci_lane] /"
    else
        printf '\n==> [%s] %s: %s FAILED (exit %s); its output:\n' "$(clock)" "$ci_lane" "$name" "$rc" >&2
        tail -n 300 "$log" | sed "s/^/    [$ci_lane] /" >&2
    fi
    return "$rc"
}

steps_table() {
    [ -s "$ci_record" ] || return 0
    printf '\n| step | lane | began | minutes | outcome | free disk after |\n|---|---|---|---|---|---|\n'
    sort -s -t$'\t' -k3,3n "$ci_record" | while IFS=$'\t' read -r lane name began ended outcome free; do
        local took=$((ended - began))
        printf '| %s | %s | %dm%02ds | %d.%d | %s | %s |\n' "$name" "$lane" $((began / 60)) $((began % 60)) \
            $((took / 60)) $(((took % 60) * 10 / 60)) "$outcome" "$free"
    done
    printf '\nwall time %s\n' "$(clock)"
}
