# bash completion for redlock, installed by tools/meson.build as
# share/bash-completion/completions/redlock. The flags follow the table in
# tools/args.cpp: keep the two in step.

_redlock() {
  local cur prev
  cur=${COMP_WORDS[COMP_CWORD]}
  prev=${COMP_WORDS[COMP_CWORD - 1]}

  local common='--master -m --password-file --connect-timeout --command-timeout --key-prefix
    --quarantine --tls-ca --tls-cert --tls-key --tls-server-name --tls-insecure --help -h'
  # Flags that take a value (the next word).
  local valued=' -m --master --ttl -w --wait -E --conflict-exit-code --kill-after --connect-timeout
    --command-timeout --key-prefix --quarantine --password-file --tls-ca --tls-cert --tls-key
    --tls-server-name --owner '

  # The command is the first word that is neither an option nor an option's
  # value (common options may come before it).
  local i word verb='' verb_at=0
  for ((i = 1; i < COMP_CWORD; i++)); do
    word=${COMP_WORDS[i]}
    if [[ $word == -* ]]; then
      [[ $valued == *" $word "* ]] && ((i++))
      continue
    fi
    verb=$word
    verb_at=$i
    break
  done

  # After `run ... --` comes a command line of its own.
  if [[ $verb == run ]]; then
    for ((i = verb_at + 1; i < COMP_CWORD; i++)); do
      if [[ ${COMP_WORDS[i]} == -- ]]; then
        if declare -F _command_offset >/dev/null; then
          _command_offset $((i + 1))
        else
          mapfile -t COMPREPLY < <(compgen -c -- "$cur" | sort -u)
        fi
        return
      fi
    done
  fi

  case $prev in
    --password-file | --tls-ca | --tls-cert | --tls-key)
      mapfile -t COMPREPLY < <(compgen -f -- "$cur")
      compopt -o filenames 2>/dev/null
      return
      ;;
    -m | --master)
      mapfile -t COMPREPLY < <(compgen -W 'redis:// rediss:// unix://' -- "$cur")
      compopt -o nospace 2>/dev/null
      return
      ;;
    --ttl | -w | --wait | -E | --conflict-exit-code | --kill-after | --connect-timeout | \
      --command-timeout | --key-prefix | --quarantine | --tls-server-name | --owner | --permits | --also)
      return # a value of the user's own
      ;;
  esac

  local words
  case $verb in
    '')
      if [[ $cur == -* ]]; then
        words="$common --version"
      else
        words='run acquire extend release status leader help'
      fi
      ;;
    help)
      ((COMP_CWORD == verb_at + 1)) && words='run acquire extend release status leader'
      ;;
    run) words="$common --ttl --nonblock -n --wait -w --conflict-exit-code -E --verbose -v --kill-after --fencing --owner --shared --permits --also --elect --" ;;
    acquire) words="$common --ttl --nonblock -n --wait -w --conflict-exit-code -E --verbose -v --fencing --owner --shared" ;;
    extend) words="$common --ttl --shared" ;;
    release) words="$common --shared" ;;
    status) words="$common --json" ;;
    leader) words="$common --json --watch" ;;
  esac
  # Flags only where one is being typed: RESOURCE and VALUE are the user's.
  if [[ -n $verb && $verb != help && $cur != -* ]]; then
    words=''
    [[ $verb == run ]] && words='--'
  fi
  [[ -n $words ]] && mapfile -t COMPREPLY < <(compgen -W "$words" -- "$cur")
}
complete -F _redlock redlock
