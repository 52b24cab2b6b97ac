package workercli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"
)

func newWebhookCommand(stderr io.Writer) *cobra.Command {
	var (
		f                           Flags
		listen, secret, metricsAddr string
	)
	cmd := &cobra.Command{
		Use:     "webhook",
		Short:   "serve the sessions webhooks announce (session.status_run_started), with no poll loop",
		Example: `  ANTHROPIC_ENVIRONMENT_KEY=$KEY MEMSTORE_WEBHOOK_SECRET=whsec_… memstore worker webhook --environment-id $ENV --listen 0.0.0.0:8090`,
		Args:    NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return workerWebhook(cmd.Context(), &f, listen, secret, metricsAddr, stderr)
		},
	}
	fs := cmd.Flags()
	f.Register(fs)
	MetricsAddrFlag(fs, &metricsAddr)
	fs.StringVar(&listen, "listen", "127.0.0.1:8090", "address to receive webhook deliveries on")
	fs.StringVar(&secret, "webhook-secret", EnvOr("MEMSTORE_WEBHOOK_SECRET", ""), "the endpoint's signing secret, whsec_… (env MEMSTORE_WEBHOOK_SECRET)")
	return cmd
}

// workerWebhook is `memstore worker webhook`: a worker that webhooks wake
// instead of a poll loop, listening on listen for the deliveries of an
// endpoint subscribed to session.status_run_started.
func workerWebhook(ctx context.Context, f *Flags, listen, secret, metricsAddr string, stderr io.Writer) error {
	w, stopMetrics, err := f.newWorker(stderr, "", metricsAddr)
	if err != nil {
		return err
	}
	defer stopMetrics()
	h, err := w.NewWebhookHandler(secret)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w (pick a free address with --listen)", listen, err)
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	fmt.Fprintf(stderr, "worker webhook listening on %s\n", ln.Addr())
	OnForceQuit(ctx, w.Abandon)
	runErr := h.Run(ctx)
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	hs.Shutdown(sctx)
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return runErr
}
