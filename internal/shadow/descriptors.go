package shadow

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/walshadow/walshadow/internal/desclog"
	"github.com/walshadow/walshadow/internal/wal"
)

// descriptorQuery reads relation shapes from the catalogs in one statement:
// one row per column (attnum >= 1, dropped ones included) of every
// relation of the wanted kinds, with the relation's fields repeated. On a
// hot standby at a catalog boundary this is the committed view as of the
// boundary. $1 is the oid list (NULL = every user relation).
const descriptorQuery = `
SELECT c.oid, d.oid,
       CASE WHEN c.reltablespace = 0 THEN d.dattablespace ELSE c.reltablespace END,
       COALESCE(pg_catalog.pg_relation_filenode(c.oid), 0), -- NULL: no storage (partitioned)
       c.relnamespace, n.nspname, c.relname, c.relkind::text, c.relpersistence::text, c.relreplident::text,
       c.reltoastrelid,
       COALESCE((SELECT i.indexrelid FROM pg_catalog.pg_index i
                  WHERE i.indrelid = c.oid AND ((c.relreplident = 'd' AND i.indisprimary) OR (c.relreplident = 'i' AND i.indisreplident))
                  LIMIT 1), 0),
       -- The key columns only: an index's INCLUDE columns follow its
       -- indnkeyatts key columns in indkey, and may be NULL.
       COALESCE((SELECT ARRAY(SELECT k.attnum FROM unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord)
                              WHERE k.ord <= i.indnkeyatts ORDER BY k.ord)::int2[]::text
                   FROM pg_catalog.pg_index i
                  WHERE i.indrelid = c.oid AND ((c.relreplident = 'd' AND i.indisprimary) OR (c.relreplident = 'i' AND i.indisreplident))
                  LIMIT 1), ''),
       -- A relation without columns (CREATE TABLE t ()) has one row
       -- here, attnum 0: it has a shape, and rows.
       COALESCE(a.attnum, 0), COALESCE(a.attname, ''), COALESCE(a.atttypid, 0), COALESCE(a.atttypmod, -1),
       -- A composite type's column names its attributes too: ALTER TYPE
       -- changes how the values already stored read, so the column's
       -- shape must change with it.
       CASE WHEN a.attisdropped OR a.attnum IS NULL THEN ''
            WHEN t.typtype = 'c' THEN pg_catalog.format_type(a.atttypid, a.atttypmod) || ' (' ||
                 COALESCE((SELECT pg_catalog.string_agg(pg_catalog.quote_ident(ca.attname) || ' ' || pg_catalog.format_type(ca.atttypid, ca.atttypmod), ', ' ORDER BY ca.attnum)
                             FROM pg_catalog.pg_attribute ca
                            WHERE ca.attrelid = t.typrelid AND ca.attnum > 0 AND NOT ca.attisdropped), '') || ')'
            ELSE pg_catalog.format_type(a.atttypid, a.atttypmod) END,
       COALESCE(t.typtype::text, ''), COALESCE(t.typbasetype, 0), COALESCE(t.typelem, 0),
       COALESCE(a.attnotnull, false), COALESCE(a.attisdropped, false), COALESCE(a.attbyval, false), COALESCE(a.attlen, 0),
       COALESCE(a.attalign::text, ''), COALESCE(a.attstorage::text, ''),
       COALESCE(a.atthasmissing, false), CASE WHEN a.atthasmissing THEN (a.attmissingval::text::text[])[1] END
FROM pg_catalog.pg_class c
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
JOIN pg_catalog.pg_database d ON d.datname = pg_catalog.current_database()
LEFT JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0
LEFT JOIN pg_catalog.pg_type t ON t.oid = a.atttypid
WHERE c.oid >= 16384 AND c.relkind IN ('r', 'p', 'm', 't')
  -- The relations asked for, and those with a column of a composite
  -- type asked for (its pg_class row: ALTER TYPE touched it).
  AND ($1::oid[] IS NULL OR c.oid = ANY($1::oid[])
       OR EXISTS (SELECT 1 FROM pg_catalog.pg_attribute da JOIN pg_catalog.pg_type dt ON dt.oid = da.atttypid
                   WHERE da.attrelid = c.oid AND da.attnum > 0 AND NOT da.attisdropped
                     AND dt.typtype = 'c' AND dt.typrelid = ANY($1::oid[])))
ORDER BY c.oid, a.attnum`

// ReadDescriptors reads the shapes of the given relations (nil: every user
// relation of kind r, p, m or t) from the database conn is connected to;
// an oid of a composite type's relation (or a table's, as a row type)
// brings the relations with a column of that type.
// Relations that do not exist (dropped) are simply absent from the result.
func ReadDescriptors(ctx context.Context, conn *pgx.Conn, oids []uint32) ([]desclog.Descriptor, error) {
	var arg any
	if oids != nil {
		arg = oids
	}
	rows, err := conn.Query(ctx, descriptorQuery, arg)
	if err != nil {
		return nil, fmt.Errorf("reading relation descriptors: %w", err)
	}
	defer rows.Close()
	var out []desclog.Descriptor
	for rows.Next() {
		var (
			oid, db, spc, filenode, nsOid, toast, identIdx uint32
			nsName, relName, kind, persistence, replIdent  string
			keyText                                        string
			col                                            desclog.Column
			typeKind, align, storage                       string
			missing                                        *string
		)
		err := rows.Scan(&oid, &db, &spc, &filenode, &nsOid, &nsName, &relName, &kind, &persistence, &replIdent,
			&toast, &identIdx, &keyText,
			&col.Num, &col.Name, &col.TypeOid, &col.TypMod, &col.TypeName, &typeKind, &col.BaseTypeOid, &col.ElemTypeOid,
			&col.NotNull, &col.Dropped, &col.ByVal, &col.Len, &align, &storage, &col.HasMissing, &missing)
		if err != nil {
			return nil, fmt.Errorf("reading relation descriptors: %w", err)
		}
		col.TypeKind, col.Align, col.Storage, col.Missing = firstByte(typeKind), firstByte(align), firstByte(storage), missing
		if n := len(out); n == 0 || out[n-1].Oid != oid {
			keys, err := parseInt2Vector(keyText)
			if err != nil {
				return nil, fmt.Errorf("relation %d: replica identity key %q: %w", oid, keyText, err)
			}
			out = append(out, desclog.Descriptor{
				Oid: oid, DbOid: db,
				Rfn:          wal.RelFileNode{SpcOid: spc, DbOid: db, RelNum: filenode},
				NamespaceOid: nsOid, Namespace: nsName, Name: relName,
				Kind: firstByte(kind), Persistence: firstByte(persistence), ReplIdent: firstByte(replIdent),
				ToastOid: toast, KeyAttnums: keys, IdentityIndexOid: identIdx,
			})
		}
		if col.Num == 0 {
			continue // no columns
		}
		d := &out[len(out)-1]
		d.Columns = append(d.Columns, col)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading relation descriptors: %w", err)
	}
	return out, nil
}

func firstByte(s string) byte {
	if s == "" {
		return 0
	}
	return s[0]
}

// parseInt2Vector parses an int2[] in text form, "{1,3}" (or "" for none);
// an int2vector cast to int2[] keeps its zero lower bound: "[0:1]={1,3}".
func parseInt2Vector(s string) ([]int16, error) {
	if len(s) > 0 && s[0] == '[' {
		if i := strings.IndexByte(s, '='); i > 0 {
			s = s[i+1:]
		}
	}
	if s == "" || s == "{}" {
		return nil, nil
	}
	if len(s) < 2 || s[0] != '{' || s[len(s)-1] != '}' {
		return nil, fmt.Errorf("not an array")
	}
	var out []int16
	start := 1
	for i := 1; i < len(s); i++ {
		if s[i] == ',' || s[i] == '}' {
			n, err := strconv.ParseInt(s[start:i], 10, 16)
			if err != nil {
				return nil, err
			}
			out = append(out, int16(n))
			start = i + 1
		}
	}
	return out, nil
}
