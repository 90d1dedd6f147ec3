// Inline SVG line and scatter plots for the self-contained HTML reports
// (bench and advise share the style). Thread-safety: pure functions.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace pc::loadgen {

struct Series {
  std::string name, color;
  std::vector<std::pair<double, double>> pts;
  bool line = true;  // polyline (CDF, curve) or dots (scatter)
};

std::string HtmlEscape(const std::string& s);
// One <svg id=id class="plot"> with axes, ticks, labels and a legend.
std::string Plot(const std::string& id, const std::string& title, const std::string& xlabel, const std::string& ylabel,
                 const std::vector<Series>& series);
// The empirical CDF of v as a line series.
Series Cdf(std::string name, std::string color, std::vector<double> v);
// The page head with the shared style, and its foot.
std::string HtmlHead(const std::string& title);
std::string HtmlFoot();

}  // namespace pc::loadgen
