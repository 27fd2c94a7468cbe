"""SQL of the stream index: normalized text keys, ambiguity count and observation counts (DuckDB)."""


def _norm(column: str) -> str:
    return f"trim(lower(regexp_replace(coalesce({column}, ''), '[^A-Za-z0-9]+', ' ', 'g')))"


STREAM_INDEX = f"""
CREATE TABLE streams AS
WITH counts AS (
    SELECT stream_id, count(*) AS n_obs, min(ts) AS first_ts, max(ts) AS last_ts FROM observations GROUP BY stream_id
)
SELECT s.*,
       CASE WHEN starts_with(s.equipment, s.site_id || '.') THEN substr(s.equipment, length(s.site_id) + 2)
            ELSE s.equipment END AS equipment_role,
       {_norm("s.site_id")} AS site_key, {_norm("s.point_class")} AS class_key,
       {_norm("s.equipment")} AS equipment_key, {_norm("s.equipment_type")} AS equipment_type_key,
       {_norm("s.location")} AS location_key, {_norm("s.label")} AS label_key,
       -- the streams resolve_point(site, class, equipment) finds: without equipment, every stream of the class at the
       -- site
       CASE WHEN s.equipment IS NULL THEN count(*) OVER (PARTITION BY s.site_id, s.point_class)
            ELSE count(*) OVER (PARTITION BY s.site_id, s.point_class, s.equipment, coalesce(s.location, '')) END
           AS ambiguity_count,
       coalesce(c.n_obs, 0) AS n_obs, c.first_ts, c.last_ts, coalesce(c.n_obs, 0) > 0 AS tool_ready,
       coalesce(t.content_twins, 0) AS content_twins
FROM streams_in s LEFT JOIN counts c USING (stream_id) LEFT JOIN twins_in t USING (stream_id)
ORDER BY s.stream_id
"""
