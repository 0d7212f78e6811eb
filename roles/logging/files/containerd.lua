-- Records from the cri parser keep the line in "message" and carry no "time": move the line to "log" and add
-- the record's time (UTC, RFC 3339 with nanoseconds), as the docker parser gives them. Other records pass as
-- they are.
function containerd(tag, timestamp, record)
  if record["logtag"] == nil then
    return 0, timestamp, record
  end
  local t = os.date("!*t", timestamp["sec"])
  record["time"] = string.format("%4d-%02d-%02dT%02d:%02d:%02d.%sZ", t["year"], t["month"], t["day"],
                                 t["hour"], t["min"], t["sec"], timestamp["nsec"])
  record["log"] = record["message"]
  record["message"] = nil
  return 1, timestamp, record
end
