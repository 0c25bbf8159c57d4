package source

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/walshadow/walshadow/internal/testrig"
)

// writeServerCert writes a self-signed certificate and key for 127.0.0.1
// into a directory the server's OS user owns, and returns the paths.
func writeServerCert(t *testing.T) (certPath, keyPath string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "127.0.0.1"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "walshadow-tls-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	certPath, keyPath = filepath.Join(dir, "server.crt"), filepath.Join(dir, "server.key")
	os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600)
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Skipf("no postgres user: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		for _, p := range []string{dir, certPath, keyPath} {
			if err := os.Chown(p, uid, -1); err != nil {
				t.Fatal(err)
			}
		}
	}
	return certPath, keyPath
}

// TestClientTLS streams over TLS (sslmode=require) and checks the server
// sees the replication connection encrypted.
func TestClientTLS(t *testing.T) {
	cert, key := writeServerCert(t)
	pg := testrig.StartPostgres(t,
		testrig.WithSetting("ssl", "on"),
		testrig.WithSetting("ssl_cert_file", cert),
		testrig.WithSetting("ssl_key_file", key))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := Connect(ctx, pg.DSN()+"&sslmode=require")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	id, err := c.IdentifySystem(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.StartReplication(ctx, "", pg.CurrentLSN(t)-pg.CurrentLSN(t)%wal16MiB, id.Timeline); err != nil {
		t.Fatal(err)
	}
	pg.Exec(t, "CREATE TABLE tls_probe (id int)")
	if _, err := c.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	var ssl bool
	if err := pg.QueryRow(t, "SELECT s.ssl FROM pg_stat_ssl s JOIN pg_stat_replication r USING (pid) WHERE r.pid = $1", int(c.ReplicationPID())).Scan(&ssl); err != nil || !ssl {
		t.Fatalf("replication connection not encrypted: ssl=%v err=%v", ssl, err)
	}
}

const wal16MiB = 16 << 20
