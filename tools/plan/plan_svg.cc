#include "tools/plan/plan_svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <vector>

namespace tandem::tools {
namespace {

constexpr double kWidth = 720, kHeight = 460;
constexpr double kLeft = 80, kRight = 150, kTop = 40, kBottom = 60;  // margins; legend on the right
const char* const kColors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                               "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

std::string Num(double v) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.4g", v);
  return text;
}

std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else out += c;
  }
  return out;
}

// A plot area mapping data to pixels, with axes, ticks and labels.
class Canvas {
 public:
  Canvas(double x_max, double y_max) : x_max_(x_max > 0 ? x_max : 1), y_max_(y_max > 0 ? y_max : 1) {}
  double X(double v) const { return kLeft + v / x_max_ * (kWidth - kLeft - kRight); }
  double Y(double v) const { return kHeight - kBottom - v / y_max_ * (kHeight - kTop - kBottom); }

  void Begin(const std::string& title, const std::string& x_label, const std::string& y_label, bool x_ticks = true) {
    svg_ += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + Num(kWidth) + "\" height=\"" + Num(kHeight) +
            "\" font-family=\"sans-serif\" font-size=\"12\">\n";
    svg_ += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
    Text(kWidth / 2, 22, title, "middle", 15);
    Text((kLeft + kWidth - kRight) / 2, kHeight - 15, x_label, "middle");
    svg_ += "<text transform=\"translate(18," + Num((kTop + kHeight - kBottom) / 2) +
            ") rotate(-90)\" text-anchor=\"middle\">" + Escape(y_label) + "</text>\n";
    Line(X(0), Y(0), X(x_max_), Y(0), "black");
    Line(X(0), Y(0), X(0), Y(y_max_), "black");
    for (int i = 0; i <= 5; ++i) {
      const double y = y_max_ * i / 5;
      Line(X(0), Y(y), X(x_max_), Y(y), "#e0e0e0");
      Text(X(0) - 6, Y(y) + 4, Num(y), "end");
      if (x_ticks) {
        const double x = x_max_ * i / 5;
        Text(X(x), Y(0) + 16, Num(x), "middle");
      }
    }
  }
  void Line(double x1, double y1, double x2, double y2, const std::string& color, const std::string& dash = "") {
    svg_ += "<line x1=\"" + Num(x1) + "\" y1=\"" + Num(y1) + "\" x2=\"" + Num(x2) + "\" y2=\"" + Num(y2) +
            "\" stroke=\"" + color + "\"" + (dash.empty() ? "" : " stroke-dasharray=\"" + dash + "\"") + "/>\n";
  }
  void Polyline(const std::vector<std::pair<double, double>>& points, const std::string& color) {
    if (points.size() < 2) return;
    svg_ += "<polyline fill=\"none\" stroke-width=\"2\" stroke=\"" + color + "\" points=\"";
    for (const auto& [x, y] : points) svg_ += Num(X(x)) + "," + Num(Y(y)) + " ";
    svg_ += "\"/>\n";
  }
  void Point(double x, double y, const std::string& color, bool filled, bool square = false) {
    const std::string fill = filled ? color : "white";
    if (square) {
      svg_ += "<rect x=\"" + Num(X(x) - 4) + "\" y=\"" + Num(Y(y) - 4) + "\" width=\"8\" height=\"8\" fill=\"" + fill +
              "\" stroke=\"" + color + "\"/>\n";
    } else {
      svg_ += "<circle cx=\"" + Num(X(x)) + "\" cy=\"" + Num(Y(y)) + "\" r=\"4\" fill=\"" + fill + "\" stroke=\"" +
              color + "\"/>\n";
    }
  }
  void Text(double x, double y, const std::string& text, const std::string& anchor = "start", int size = 12) {
    svg_ += "<text x=\"" + Num(x) + "\" y=\"" + Num(y) + "\" text-anchor=\"" + anchor + "\" font-size=\"" +
            std::to_string(size) + "\">" + Escape(text) + "</text>\n";
  }
  void Legend(int row, const std::string& color, const std::string& label) {
    const double y = kTop + 10 + row * 18;
    Line(kWidth - kRight + 20, y, kWidth - kRight + 40, y, color);
    Text(kWidth - kRight + 46, y + 4, label);
  }
  std::string End() { return svg_ + "</svg>\n"; }

 private:
  double x_max_, y_max_;
  std::string svg_;
};

double Finite(double v) { return std::isfinite(v) ? v : 0; }

}  // namespace

std::string GoodputVsRatioSvg(const planner::Plan& plan) {
  std::map<int, std::vector<const planner::CandidateResult*>> by_total;
  double y_max = plan.rate;
  for (const planner::CandidateResult& c : plan.candidates) {
    by_total[c.screen.layout.Gpus()].push_back(&c);
    y_max = std::max(y_max, Finite(c.Goodput()));
  }
  // x: prefill share in [0, 1]; colocated layouts sit at 1.1.
  Canvas canvas(1.15, y_max * 1.1);
  canvas.Begin("Max goodput against the P:D ratio (filled: simulated, hollow: screen; squares: colocated)",
               "prefill share of the GPUs, x / (x + y)", "goodput (req/s at the SLO)", false);
  for (int i = 0; i <= 4; ++i) canvas.Text(canvas.X(i / 4.0), canvas.Y(0) + 16, Num(i / 4.0), "middle");
  canvas.Text(canvas.X(1.1), canvas.Y(0) + 16, "coloc.", "middle");
  canvas.Line(canvas.X(0), canvas.Y(plan.rate), canvas.X(1.15), canvas.Y(plan.rate), "#555555", "5,4");
  canvas.Text(canvas.X(0) + 4, canvas.Y(plan.rate) - 4, "requested " + Num(plan.rate) + " req/s");
  int row = 0;
  for (const auto& [total, candidates] : by_total) {
    const std::string color = kColors[static_cast<size_t>(row) % 10];
    std::vector<std::pair<double, double>> line;
    for (const planner::CandidateResult* c : candidates) {
      const planner::Layout& l = c->screen.layout;
      const double goodput = Finite(c->Goodput());
      if (l.colocated()) {
        canvas.Point(1.1, goodput, color, c->simulated, /*square=*/true);
        continue;
      }
      const double share = static_cast<double>(l.prefill_nodes) / l.Gpus();
      line.push_back({share, goodput});
      canvas.Point(share, goodput, color, c->simulated);
    }
    canvas.Polyline(line, color);
    canvas.Legend(row++, color, std::to_string(total) + " GPU" + (total > 1 ? "s" : ""));
  }
  return canvas.End();
}

std::string ThroughputVsInteractivitySvg(const planner::Plan& plan) {
  double x_max = 0, y_max = 0;
  for (const planner::CandidateResult& c : plan.candidates) {
    for (const planner::SimResult& r : c.curve) {
      if (r.latency.tpot_p50 > 0) x_max = std::max(x_max, Finite(1 / r.latency.tpot_p50));
      y_max = std::max(y_max, r.output_tokens_per_second / c.screen.layout.Gpus());
    }
  }
  Canvas canvas(x_max * 1.1, y_max * 1.1);
  canvas.Begin("Throughput against interactivity (each simulated layout at 1/4 ... all of its goodput)",
               "tokens/s per user (1 / TPOT p50)", "output tokens/s per GPU");
  int row = 0;
  for (const planner::CandidateResult& c : plan.candidates) {
    if (c.curve.empty()) continue;
    const std::string color = kColors[static_cast<size_t>(row) % 10];
    std::vector<std::pair<double, double>> line;
    for (const planner::SimResult& r : c.curve) {
      if (!(r.latency.tpot_p50 > 0) || !std::isfinite(r.latency.tpot_p50)) continue;
      line.push_back({1 / r.latency.tpot_p50, r.output_tokens_per_second / c.screen.layout.Gpus()});
      canvas.Point(line.back().first, line.back().second, color, true);
    }
    canvas.Polyline(line, color);
    canvas.Legend(row++, color, c.screen.layout.Name());
  }
  if (row == 0) canvas.Text(kWidth / 2, kHeight / 2, "no layout was simulated", "middle");
  return canvas.End();
}

Status WritePlanSvgs(const planner::Plan& plan, const std::string& dir) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) return InvalidArgumentError("svg_dir " + dir + ": " + error.message());
  const std::pair<const char*, std::string> files[] = {
      {"goodput_vs_pd_ratio.svg", GoodputVsRatioSvg(plan)},
      {"throughput_vs_interactivity.svg", ThroughputVsInteractivitySvg(plan)}};
  for (const auto& [name, text] : files) {
    const std::string path = dir + "/" + name;
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << text;
    out.close();
    if (!out) return InvalidArgumentError("cannot write " + path);
  }
  return Status::Ok();
}

}  // namespace tandem::tools
