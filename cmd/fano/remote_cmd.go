package main

import (
	"fmt"
	"net"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"fano/remote"
)

// newRemoteCmd is `fano remote`: the certificates of gateway hosts.
func newRemoteCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "remote",
		Short: "Certificates for gateway hosts on other machines (init, enroll, revoke)",
		Long: "Gateway hosts (fano gateway serve) and the orchestrator talk over mutual TLS with\n" +
			"certificates of fano's own CA, kept in <data-dir>/remote/. Run `fano remote init` once on\n" +
			"the orchestrator, then `fano remote enroll <host>` for each host. See docs/remote.md.",
	}
	cmd.AddCommand(newRemoteInitCmd(g), newRemoteEnrollCmd(g), newRemoteRevokeCmd(g))
	return cmd
}

func newRemoteInitCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "init",
		Short: "Make the CA and the orchestrator's certificate in <data-dir>/remote/",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig(g)
			if err != nil {
				return err
			}
			if err := remote.Init(cfg.DataDir, time.Now()); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "made a CA and the orchestrator's certificate in %s (keys 0600)\nnext: fano remote enroll <host> --out <host>.bundle\n",
				remote.Dir(cfg.DataDir))
			return nil
		},
	}
}

func newRemoteEnrollCmd(g *globals) *cobra.Command {
	var out, orchestrator string
	cmd := &cobra.Command{
		Use:   "enroll <host>",
		Short: "Issue a host's certificate and write its bundle (certificate, key, CA, orchestrator address)",
		Long: "Issues the certificate of gateway host <host> and writes its bundle to --out (mode 0600), or to\n" +
			"stdout with --out -. The bundle holds the host's private key: copy it to the host over a\n" +
			"channel you trust. Enrolling a host again revokes its earlier certificate.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := loadConfig(g)
			if err != nil {
				return err
			}
			host := args[0]
			if orchestrator == "" {
				orchestrator = cfg.Remote.Advertise
			}
			if orchestrator == "" {
				h, _, err := net.SplitHostPort(cfg.Remote.Listen)
				if err == nil && h != "" && h != "0.0.0.0" && h != "::" {
					orchestrator = cfg.Remote.Listen
				}
			}
			if orchestrator == "" {
				return fmt.Errorf("remote enroll %s: which address does the host dial? pass --orchestrator host:port (or set remote.advertise)", host)
			}
			bundle, err := remote.Enroll(cfg.DataDir, host, orchestrator, time.Now())
			if err != nil {
				return err
			}
			if _, ok := cfg.Hosts[host]; !ok {
				fmt.Fprintf(cmd.ErrOrStderr(), "note: %s is not in hosts of the config yet; add it (hosts: {%s: {}}) or it is refused\n", host, host)
			}
			if out == "-" {
				_, err := cmd.OutOrStdout().Write(bundle)
				return err
			}
			if out == "" {
				out = host + ".bundle"
			}
			if err := remote.WriteBundle(out, bundle); err != nil {
				return fmt.Errorf("remote enroll %s: %w", host, err)
			}
			abs, _ := filepath.Abs(out)
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s (0600; it holds the host's key): copy it to %s and set gateway.bundle to it\n", abs, host)
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "bundle file (default <host>.bundle; - for stdout)")
	cmd.Flags().StringVar(&orchestrator, "orchestrator", "", "host:port the host dials (default remote.advertise)")
	return cmd
}

func newRemoteRevokeCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "revoke <host>",
		Short: "Refuse a host's certificate from its next connection on",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := loadConfig(g)
			if err != nil {
				return err
			}
			if err := remote.Revoke(cfg.DataDir, args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "revoked the certificate of %s: refused from its next connection on\n", args[0])
			return nil
		},
	}
}
