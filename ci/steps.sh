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
if [ -z "${ci_busy0:-}" ]; then
    read -r _ u n y i w q sq st _ </proc/stat
    ci_busy0=$((u + n + y + q + sq + st)) ci_all0=$((u + n + y + q + sq + st + i + w))
    unset u n y i w q sq st
fi

free_disk() { df -Ph . | awk 'NR == 2 { print $4 }'; }
clock() {
    local s=$((SECONDS - ci_start))
    printf '%dm%02ds' $((s / 60)) $((s % 60))
}

# Where the minutes went: the CPU a step's own processes used (this
# shell's finished children, from `times`, which must run in this shell and
# not a subshell) and how busy the machine's cores were meanwhile (from
# /proc/stat). A step whose cores were all busy waited on CPU; one whose
# cores idled waited on something else.
cpu_mark() {
    local user sys
    times >"$ci_logs/times.$BASHPID"
    { read -r _ && read -r user sys; } <"$ci_logs/times.$BASHPID"
    cpu_step=$(($(to_secs "$user") + $(to_secs "$sys")))
    local _c u n y i w q sq st
    read -r _c u n y i w q sq st _ </proc/stat
    cpu_busy=$((u + n + y + q + sq + st)) cpu_all=$((u + n + y + q + sq + st + i + w))
}
to_secs() {
    local t=${1%s}
    local m=${t%%m*} s=${t#*m}
    echo $((m * 60 + ${s%%.*}))
}

# A lane is a background subshell of the main shell: when it ends, its
# processes' CPU joins the main shell's children, inside whatever step the
# main shell is in. It leaves its total behind (lane_ended, its last
# command) for that step to take off its own.
lane_ended() {
    cpu_mark
    echo "$cpu_step" >"$ci_logs/lane-$BASHPID.cpu"
}
lanes_ended_cpu() {
    local f total=0 c
    for f in "$ci_logs"/lane-*.cpu; do
        [ -e "$f" ] || continue
        read -r c <"$f"
        total=$((total + c))
        mv "$f" "$f.counted"
    done
    echo "$total"
}

# record LANE NAME START END OUTCOME, after a cpu_mark at its start
record() {
    local step0=$cpu_step busy0=$cpu_busy all0=$cpu_all
    cpu_mark
    if [ "${ci_lane:-main}" = main ]; then
        step0=$((step0 + $(lanes_ended_cpu)))
    fi
    local cores=$(((cpu_busy - busy0) * $(nproc) * 100 / (cpu_all - all0 > 0 ? cpu_all - all0 : 1)))
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$5" "$(free_disk)" \
        $((cpu_step - step0)) "$cores" >>"$ci_record"
}

step() {
    local name=$1 began=$((SECONDS - ci_start)) rc=0
    shift
    printf '\n==> [%s, %s free] %s\n' "$(clock)" "$(free_disk)" "$name"
    cpu_mark
    "$@" || rc=$?
    record "${ci_lane:-main}" "$name" "$began" $((SECONDS - ci_start)) "$([ "$rc" = 0 ] && echo ok || echo "FAILED ($rc)")"
    return "$rc"
}

lane_step() {
    local name=$1 began=$((SECONDS - ci_start)) rc=0 log
    shift
    log=$ci_logs/$(printf '%s' "$name" | tr -c 'a-zA-Z0-9' '-' | cut -c1-60).log
    printf '\n==> [%s, %s free] %s: %s (output in %s)\n' "$(clock)" "$(free_disk)" "$ci_lane" "$name" "$log"
    cpu_mark
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
    printf '\n| step | lane | began | minutes | its CPU-minutes | cores busy meanwhile | outcome | free disk after |\n|---|---|---|---|---|---|---|---|\n'
    sort -s -t$'\t' -k3,3n "$ci_record" | while IFS=$'\t' read -r lane name began ended outcome free cpu cores; do
        local took=$((ended - began))
        printf '| %s | %s | %dm%02ds | %d.%d | %d.%d | %d.%02d of %d | %s | %s |\n' "$name" "$lane" \
            $((began / 60)) $((began % 60)) $((took / 60)) $(((took % 60) * 10 / 60)) \
            $((cpu / 60)) $(((cpu % 60) * 10 / 60)) $((cores / 100)) $((cores % 100)) "$(nproc)" \
            "$outcome" "$free"
    done
    local _c u n y i w q sq st
    read -r _c u n y i w q sq st _ </proc/stat
    local busy=$((u + n + y + q + sq + st - ci_busy0)) all=$((u + n + y + q + sq + st + i + w - ci_all0))
    printf '\nwall time %s; the cores were busy %d%% of it\n' "$(clock)" $((busy * 100 / (all > 0 ? all : 1)))
}
