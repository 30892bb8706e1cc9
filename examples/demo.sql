-- The demo catalogue behind the shipped hangar.toml (SQLite).
-- Hangar runs this once, when examples/demo.db does not exist yet.
CREATE TABLE products (
  id       INTEGER PRIMARY KEY,
  name     TEXT NOT NULL,
  category TEXT NOT NULL,
  price    REAL NOT NULL,
  in_stock INTEGER NOT NULL
);
INSERT INTO products (id, name, category, price, in_stock) VALUES
  (1, 'Trail running shoes', 'footwear', 129.00, 14),
  (2, 'Rain jacket', 'outerwear', 189.50, 3),
  (3, 'Merino base layer', 'clothing', 79.90, 0),
  (4, 'Headlamp 400 lm', 'gear', 44.00, 27),
  (5, 'Trekking poles', 'gear', 99.00, 8),
  (6, 'Wool socks (3 pairs)', 'clothing', 24.50, 60),
  (7, 'Down vest', 'outerwear', 149.00, 5),
  (8, 'Water filter', 'gear', 39.95, 12);
