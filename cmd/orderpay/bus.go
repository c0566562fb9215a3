package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"orderpay/channel/channelfile"
	"orderpay/natsbus"
)

// BusConfig shapes orderpay's streams on NATS (the --nats-* flags): their replicas and how
// much they keep. Its defaults are natsbus's, documented on natsbus.Config.
type BusConfig struct {
	// Replicas of every stream and consumer; 0 detects them at connect.
	Replicas int
	// MaxAge and MaxBytes bound the event stream, TimerMaxAge and TimerMaxBytes the timer
	// stream; negative is unlimited.
	MaxAge        time.Duration
	MaxBytes      int64
	TimerMaxAge   time.Duration
	TimerMaxBytes int64

	// The credentials for an external server (--nats), at most one kind: a .creds file, an
	// nkey seed file, a user with a file holding the password, or a file holding a token.
	// Secrets are read from their files at start and never logged.
	CredsFile    string
	NkeyFile     string
	User         string
	PasswordFile string
	TokenFile    string
	// CAFile is the CA the server's certificate must chain to; it turns TLS on. CertFile
	// and KeyFile are a client certificate and its key, for mutual TLS.
	CAFile   string
	CertFile string
	KeyFile  string
}

// defaultBusConfig shows natsbus's defaults in the flags' help.
func defaultBusConfig() BusConfig {
	return BusConfig{MaxAge: natsbus.DefaultMaxAge, MaxBytes: natsbus.DefaultMaxBytes,
		TimerMaxAge: natsbus.DefaultTimerMaxAge, TimerMaxBytes: natsbus.DefaultTimerMaxBytes}
}

// busFlags reads the --nats-* environment variables into c and defines the flags.
func busFlags(fs *flag.FlagSet, c *BusConfig) error {
	env := envName("nats-replicas")
	if v, ok := os.LookupEnv(env); ok {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("%s: %w", env, err)
		}
		c.Replicas = n
	}
	fs.IntVar(&c.Replicas, "nats-replicas", c.Replicas, "replicas of every stream and consumer; 0 detects them at connect: 3 on a cluster of three or more nodes, "+
		"the cluster's size on a smaller one, 1 on a single server or the embedded one. orderpay never lowers replicas or limits an operator raised ["+env+"]")
	for _, f := range []struct {
		value      flag.Value
		name, help string
	}{
		{ageLimit{&c.MaxAge}, "nats-max-age", "keep events on the bus this long (a duration, or unlimited)"},
		{sizeLimit{&c.MaxBytes}, "nats-max-bytes", "keep at most this much of the events per replica (e.g. 1GiB, or unlimited); the oldest go first"},
		{ageLimit{&c.TimerMaxAge}, "nats-timers-max-age", "drop a timer nobody handled after this long (a duration, or unlimited); the sweepers catch it"},
		{sizeLimit{&c.TimerMaxBytes}, "nats-timers-max-bytes", "keep at most this much of the timers per replica (e.g. 1GiB, or unlimited)"},
	} {
		env := envName(f.name)
		if v, ok := os.LookupEnv(env); ok {
			if err := f.value.Set(v); err != nil {
				return fmt.Errorf("%s: %w", env, err)
			}
		}
		fs.Var(f.value, f.name, f.help+" ["+env+"]")
	}
	for _, f := range []struct {
		dst        *string
		name, help string
	}{
		{&c.CredsFile, "nats-creds", "with --nats: a .creds file (user JWT and nkey seed) to connect with"},
		{&c.NkeyFile, "nats-nkey", "with --nats: an nkey seed file to connect with"},
		{&c.User, "nats-user", "with --nats: the user to connect as, with --nats-password-file"},
		{&c.PasswordFile, "nats-password-file", "with --nats-user: a file holding the password"},
		{&c.TokenFile, "nats-token-file", "with --nats: a file holding the token to connect with"},
		{&c.CAFile, "nats-ca", "with --nats: the CA (PEM) the server's certificate must chain to; turns TLS on"},
		{&c.CertFile, "nats-cert", "with --nats: a client certificate (PEM) for a server that asks for one, with --nats-key"},
		{&c.KeyFile, "nats-key", "with --nats-cert: the certificate's private key (PEM)"},
	} {
		env := envName(f.name)
		if v, ok := os.LookupEnv(env); ok {
			*f.dst = v
		}
		fs.StringVar(f.dst, f.name, *f.dst, f.help+" ["+env+"]")
	}
	return nil
}

// securityFlags names the credential and TLS flags given.
func (c BusConfig) securityFlags() []string {
	var given []string
	for _, f := range []struct{ name, value string }{
		{"--nats-creds", c.CredsFile}, {"--nats-nkey", c.NkeyFile}, {"--nats-user", c.User}, {"--nats-password-file", c.PasswordFile},
		{"--nats-token-file", c.TokenFile}, {"--nats-ca", c.CAFile}, {"--nats-cert", c.CertFile}, {"--nats-key", c.KeyFile},
	} {
		if f.value != "" {
			given = append(given, f.name)
		}
	}
	return given
}

// natsServers parses the servers of a --nats URL list as the client does: comma-separated,
// nats:// when no scheme is given. The error does not quote the URL, which may hold a
// password.
func natsServers(natsURL string) ([]*url.URL, error) {
	var servers []*url.URL
	for i, s := range strings.Split(natsURL, ",") {
		s = strings.TrimSuffix(strings.TrimSpace(s), "/")
		if s == "" {
			continue
		}
		if !strings.Contains(s, "://") {
			s = "nats://" + s
		}
		u, err := url.Parse(s)
		if err != nil || u.Host == "" {
			return nil, fmt.Errorf("--nats: server %d of the list is not a URL such as nats://host:4222", i+1)
		}
		servers = append(servers, u)
	}
	if len(servers) == 0 {
		return nil, errors.New("--nats names no server")
	}
	return servers, nil
}

// checkNATS refuses credential and TLS flags that conflict, are half given, or are given
// without an external server (natsURL, --nats).
func (c BusConfig) checkNATS(natsURL string) error {
	given := c.securityFlags()
	if natsURL == "" {
		if len(given) > 0 {
			return fmt.Errorf("%s %s only to an external NATS server: set --nats too, or leave %s out",
				joinAnd(given), plural(len(given), "applies", "apply"), plural(len(given), "it", "them"))
		}
		return nil
	}
	servers, err := natsServers(natsURL)
	if err != nil {
		return err
	}
	var kinds []string
	if slices.ContainsFunc(servers, func(u *url.URL) bool { return u.User != nil }) {
		kinds = append(kinds, "credentials in the --nats URL")
	}
	for _, k := range []struct {
		name  string
		given bool
	}{
		{"--nats-creds", c.CredsFile != ""}, {"--nats-nkey", c.NkeyFile != ""},
		{"--nats-user with --nats-password-file", c.User != "" || c.PasswordFile != ""}, {"--nats-token-file", c.TokenFile != ""},
	} {
		if k.given {
			kinds = append(kinds, k.name)
		}
	}
	switch {
	case len(kinds) > 1:
		return fmt.Errorf("give one kind of NATS credentials, not several: %s", joinAnd(kinds))
	case c.User != "" && c.PasswordFile == "":
		return errors.New("--nats-user needs --nats-password-file, a file holding the password")
	case c.User == "" && c.PasswordFile != "":
		return errors.New("--nats-password-file needs --nats-user")
	case c.CertFile != "" && c.KeyFile == "":
		return errors.New("--nats-cert needs --nats-key, the certificate's private key")
	case c.CertFile == "" && c.KeyFile != "":
		return errors.New("--nats-key needs --nats-cert")
	}
	return nil
}

// natsPosture says what is unsafe about an external bus (natsURL) for a deployment that
// moves real money, whose flags checkNATS passed. Whoever can publish on the bus can forge
// events, so the server must ask for credentials, wherever it is (another process on this
// machine could publish too); and a server on another machine must be reached over TLS,
// or the events and the credentials cross the network in the clear.
func (c BusConfig) natsPosture(natsURL string) []string {
	if natsURL == "" {
		return nil // the embedded server takes in-process connections only
	}
	servers, err := natsServers(natsURL)
	if err != nil {
		return []string{err.Error()}
	}
	var problems []string
	withCredentials := c.CredsFile != "" || c.NkeyFile != "" || c.User != "" || c.TokenFile != "" ||
		slices.ContainsFunc(servers, func(u *url.URL) bool { return u.User != nil })
	if !withCredentials {
		problems = append(problems, "--nats is given no credentials, and a NATS server that lets orderpay in without them lets anyone who reaches it publish forged events: "+
			"set --nats-creds, --nats-nkey, --nats-user with --nats-password-file, or --nats-token-file (and make the server ask for them)")
	}
	// As the client does, a tls:// (or wss://) server turns TLS on for every server.
	tlsOn := c.CAFile != "" || c.CertFile != "" ||
		slices.ContainsFunc(servers, func(u *url.URL) bool { return u.Scheme == "tls" || u.Scheme == "wss" })
	var remote []string
	for _, u := range servers {
		if !channelfile.IsLoopback(u.String()) {
			remote = append(remote, u.Host)
		}
	}
	if len(remote) > 0 && !tlsOn {
		problems = append(problems, fmt.Sprintf("--nats names %s, not on this machine, and TLS is off, so events and credentials would cross the network in the clear: "+
			"set --nats-ca to the CA of the server's certificate, or use tls:// URLs", joinAnd(remote)))
	}
	return problems
}

// joinAnd lists names as "a, b and c".
func joinAnd(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// openBus opens the bus of `serve`: natsConfig's, once checkNATS has passed the flags.
func (c BusConfig) openBus(ctx context.Context, natsURL, storeDir string, log *slog.Logger) (*natsbus.Bus, error) {
	cfg, err := c.natsConfig(natsURL, storeDir, log)
	if err != nil {
		return nil, err
	}
	return natsbus.Open(ctx, cfg)
}

// natsConfig is the bus of `serve`: an external server at natsURL, with the credentials and
// TLS of the flags, or the embedded one in storeDir. It reads the password and token from
// their files, and checks that the other files can be read; its errors name the flag and
// never quote a secret.
func (c BusConfig) natsConfig(natsURL, storeDir string, log *slog.Logger) (natsbus.Config, error) {
	if err := c.checkNATS(natsURL); err != nil {
		return natsbus.Config{}, err
	}
	cfg := natsbus.Config{URL: natsURL, StoreDir: storeDir, Replicas: c.Replicas, MaxAge: c.MaxAge, MaxBytes: c.MaxBytes,
		TimerMaxAge: c.TimerMaxAge, TimerMaxBytes: c.TimerMaxBytes, Logger: log,
		CredsFile: c.CredsFile, NkeyFile: c.NkeyFile, User: c.User, CAFile: c.CAFile, CertFile: c.CertFile, KeyFile: c.KeyFile}
	for _, f := range []struct{ flag, path string }{
		{"--nats-creds", c.CredsFile}, {"--nats-nkey", c.NkeyFile}, {"--nats-ca", c.CAFile}, {"--nats-cert", c.CertFile}, {"--nats-key", c.KeyFile},
	} {
		if f.path == "" {
			continue
		}
		file, err := os.Open(f.path)
		if err != nil {
			return natsbus.Config{}, fmt.Errorf("%s: %w", f.flag, err)
		}
		file.Close()
	}
	var err error
	if cfg.Password, err = readSecretFile("--nats-password-file", c.PasswordFile); err != nil {
		return natsbus.Config{}, err
	}
	if cfg.Token, err = readSecretFile("--nats-token-file", c.TokenFile); err != nil {
		return natsbus.Config{}, err
	}
	return cfg, nil
}

// readSecretFile reads a secret from the file of flag, if given, without its final line
// break. An empty file is refused; the error never quotes the secret.
func readSecretFile(flag, path string) (string, error) {
	if path == "" {
		return "", nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", flag, err)
	}
	secret := strings.TrimRight(string(b), "\r\n")
	if secret == "" {
		return "", fmt.Errorf("%s: %s is empty", flag, path)
	}
	return secret, nil
}

// ageLimit is a retention age flag: a positive duration, or "unlimited" (stored as -1).
type ageLimit struct{ d *time.Duration }

func (a ageLimit) String() string {
	switch {
	case a.d == nil:
		return ""
	case *a.d < 0:
		return "unlimited"
	}
	return a.d.String()
}

func (a ageLimit) Set(v string) error {
	if v == "unlimited" {
		*a.d = -1
		return nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return fmt.Errorf("%q is not a positive duration or unlimited", v)
	}
	*a.d = d
	return nil
}

// sizeLimit is a retention size flag: a positive size as GOMEMLIMIT writes it (1GiB), or
// "unlimited" (stored as -1).
type sizeLimit struct{ n *int64 }

func (s sizeLimit) String() string {
	switch {
	case s.n == nil:
		return ""
	case *s.n < 0:
		return "unlimited"
	case *s.n%(1<<30) == 0:
		return strconv.FormatInt(*s.n>>30, 10) + "GiB"
	case *s.n%(1<<20) == 0:
		return strconv.FormatInt(*s.n>>20, 10) + "MiB"
	}
	return strconv.FormatInt(*s.n, 10) + "B"
}

func (s sizeLimit) Set(v string) error {
	if v == "unlimited" {
		*s.n = -1
		return nil
	}
	n, err := parseBytes(v)
	if err != nil || n <= 0 {
		return fmt.Errorf("%q is not a positive size (such as 512MiB or 1GiB) or unlimited", v)
	}
	*s.n = n
	return nil
}
