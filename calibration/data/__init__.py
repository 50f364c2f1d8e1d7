"""The data layer: native dataset directories as arrays, grouped splits, and importers of foreign formats."""
