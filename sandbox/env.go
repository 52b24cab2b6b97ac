package sandbox

import (
	"fmt"
	"os"
	"os/user"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// The shell's environment is an allowlist, with or without bubblewrap: the
// worker's own variables hold its credentials (cloud keys, tokens,
// database passwords), and the shell is driven by a model, so a variable
// passed on is a secret handed over. Only what a shell needs to behave
// (where programs are, the language, the terminal, the time zone) is
// taken from the worker; HOME and USER are the session's own; anything
// else is the operator's to pass by name with --sandbox-env.

// inherited names the worker's variables every shell gets, when set.
var inherited = []string{"PATH", "LANG", "LANGUAGE", "TERM", "TZ"}

// inheritedPrefix is the locale's categories (LC_ALL, LC_CTYPE, …).
const inheritedPrefix = "LC_"

// defaultPath is the shell's PATH when the worker has none.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// ownVars are set by the worker for each session and cannot be passed.
var ownVars = []string{"HOME", "USER", "PWD"}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// ParseEnv reads a --sandbox-env value: NAME takes the worker's value of
// NAME (which must be set), NAME=value sets it. It returns "NAME=value".
func ParseEnv(s string) (string, error) {
	name, value, set := strings.Cut(s, "=")
	switch {
	case !envName.MatchString(name):
		return "", fmt.Errorf("sandbox env %q: write NAME or NAME=value, NAME made of letters, digits and _ (not starting with a digit)", s)
	case slices.Contains(ownVars, name):
		return "", fmt.Errorf("sandbox env %s: the worker sets %s for each session (its own folder, its own user); it cannot be passed", name, strings.Join(ownVars, ", "))
	case set:
		return name + "=" + value, nil
	}
	value, ok := os.LookupEnv(name)
	if !ok {
		return "", fmt.Errorf("sandbox env %s: %s is not set in the worker's environment; set it before starting the worker, or pass %s=value", name, name, name)
	}
	return name + "=" + value, nil
}

// ShellEnv is the whole environment of a session's shell: the allowlisted
// variables of the worker (PATH, LANG, LANGUAGE, LC_*, TERM, TZ), HOME set
// to home, USER to user, then Config.Env, which wins over the worker's.
func (c Config) ShellEnv(home, user string) []string {
	var env []string
	path := defaultPath
	for _, kv := range os.Environ() {
		name, value, _ := strings.Cut(kv, "=")
		switch {
		case name == "PATH":
			path = value
		case slices.Contains(inherited, name), strings.HasPrefix(name, inheritedPrefix):
			env = append(env, kv)
		}
	}
	env = append(env, "PATH="+path, "HOME="+home, "USER="+user)
	for _, kv := range c.Env {
		name, _, _ := strings.Cut(kv, "=")
		env = slices.DeleteFunc(env, func(e string) bool { return strings.HasPrefix(e, name+"=") })
		env = append(env, kv)
	}
	return env
}

// EnvNames lists the names of the variables a shell gets, for doctor and
// the session's log line: the values may be secrets.
func (c Config) EnvNames() []string {
	var names []string
	for _, kv := range c.ShellEnv("", "") {
		name, _, _ := strings.Cut(kv, "=")
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// ShellUser is the name the shell's USER holds: nobody where it runs as
// SandboxUID, else the worker's user.
func (l *Launcher) ShellUser() string {
	uid := l.ShellUID()
	if uid == SandboxUID {
		return "nobody"
	}
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil {
		return u.Username
	}
	return strconv.Itoa(uid)
}
