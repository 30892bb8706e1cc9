-- The same demo catalogue for PostgreSQL:  psql "$DATABASE_URL" -f examples/demo-postgres.sql
CREATE TABLE IF NOT EXISTS products (
  id       integer PRIMARY KEY,
  name     text NOT NULL,
  category text NOT NULL,
  price    numeric(10, 2) NOT NULL,
  in_stock integer NOT NULL
);
INSERT INTO products (id, name, category, price, in_stock) VALUES
  (1, 'Trail running shoes', 'footwear', 129.00, 14),
  (2, 'Rain jacket', 'outerwear', 189.50, 3),
  (3, 'Merino base layer', 'clothing', 79.90, 0),
  (4, 'Headlamp 400 lm', 'gear', 44.00, 27),
  (5, 'Trekking poles', 'gear', 99.00, 8),
  (6, 'Wool socks (3 pairs)', 'clothing', 24.50, 60),
  (7, 'Down vest', 'outerwear', 149.00, 5),
  (8, 'Water filter', 'gear', 39.95, 12)
ON CONFLICT (id) DO NOTHING;
