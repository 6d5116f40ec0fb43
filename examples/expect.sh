# Sourced by the examples' checks: expect STATUS TEXT COMMAND... runs COMMAND
# (at most 30 s) and wants exit status STATUS and TEXT in its output; a miss
# prints why and sets failed=1.
failed=0
expect() {
  local want=$1 text=$2 out status
  shift 2
  out=$(timeout 30 "$@" 2>&1)
  status=$?
  if [[ $status != "$want" || $out != *"$text"* ]]; then
    echo "FAIL: $* exited $status (want $want), output without '$text':"
    printf '%s\n' "$out" | sed 's/^/    /'
    failed=1
  else
    echo "ok: $* -> $status"
  fi
}
