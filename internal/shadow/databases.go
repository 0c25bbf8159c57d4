package shadow

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// sourceDatabase is one database of the source as pg_database lists it.
type sourceDatabase struct {
	oid  uint32
	name string
}

// connectableDatabasesQuery lists the databases walshadow connects to for
// their catalog filenodes: those that allow connections and are not left
// invalid by an interrupted DROP DATABASE (datconnlimit -2, PostgreSQL
// 15.4 and later), which nobody can connect to.
const connectableDatabasesQuery = "SELECT oid, datname FROM pg_database WHERE datallowconn AND datconnlimit <> -2 ORDER BY oid"

// connectableDatabaseByOID looks a listed database up again, by OID: a
// database renamed since has another name, one dropped has no row.
const connectableDatabaseByOID = "SELECT datname FROM pg_database WHERE oid = $1 AND datallowconn AND datconnlimit <> -2"

// afterListingDatabases, for tests, runs once the source's databases are
// listed, before any of them is connected to: a test drops or renames one
// there to make the race with walshadow's start deterministic.
var afterListingDatabases func(names []string)

func listDatabases(ctx context.Context, conn *pgx.Conn) ([]sourceDatabase, error) {
	rows, err := conn.Query(ctx, connectableDatabasesQuery)
	if err != nil {
		return nil, fmt.Errorf("listing the source's databases: %w", err)
	}
	var dbs []sourceDatabase
	for rows.Next() {
		var d sourceDatabase
		if err := rows.Scan(&d.oid, &d.name); err != nil {
			rows.Close()
			return nil, fmt.Errorf("listing the source's databases: %w", err)
		}
		dbs = append(dbs, d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing the source's databases: %w", err)
	}
	if afterListingDatabases != nil {
		names := make([]string, len(dbs))
		for i, d := range dbs {
			names[i] = d.name
		}
		afterListingDatabases(names)
	}
	return dbs, nil
}

// lookUpDatabase is the current name of the connectable database oid, ok
// false when there is none (dropped, or no longer connectable).
func lookUpDatabase(ctx context.Context, conn *pgx.Conn, oid uint32) (name string, ok bool, err error) {
	err = conn.QueryRow(ctx, connectableDatabaseByOID, oid).Scan(&name)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return "", false, nil
	case err != nil:
		return "", false, fmt.Errorf("looking source database %d up again: %w", oid, err)
	}
	return name, true, nil
}

// maxRenameRetries bounds how often one database is followed through a
// rename between the listing and the connection.
const maxRenameRetries = 3

// forEachDatabase runs visit on every listed database. A database the
// source dropped after listing it is gone and needs nothing: when visit
// fails and a second look (lookUp, by OID) no longer finds the database, it
// is skipped with a debug line; one renamed meanwhile is visited again
// under its new name. Every other failure is returned: a database that
// exists but cannot be read would leave its relocated catalogs unknown.
// It returns the databases skipped.
func forEachDatabase(ctx context.Context, dbs []sourceDatabase, log *slog.Logger,
	visit func(ctx context.Context, d sourceDatabase) error,
	lookUp func(ctx context.Context, oid uint32) (string, bool, error),
) (skipped []sourceDatabase, err error) {
	for _, d := range dbs {
		for renames := 0; ; renames++ {
			err := visit(ctx, d)
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				return skipped, err
			}
			name, ok, lerr := lookUp(ctx, d.oid)
			if lerr != nil {
				return skipped, fmt.Errorf("%w (and %w)", err, lerr)
			}
			if !ok {
				if log != nil {
					log.Debug("a source database was dropped while walshadow started; skipping it",
						"database", d.name, "oid", d.oid, "missing", missingDatabase(err), "error", err)
				}
				skipped = append(skipped, d)
				break
			}
			if name == d.name || renames >= maxRenameRetries {
				return skipped, err
			}
			if log != nil {
				log.Debug("a source database was renamed while walshadow started; reading it under its new name",
					"database", d.name, "new_name", name, "oid", d.oid)
			}
			d.name = name
		}
	}
	return skipped, nil
}

// missingDatabase tells the error of a connection to a database that does
// not exist (SQLSTATE 3D000 invalid_catalog_name).
func missingDatabase(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "3D000"
}
