import os

import pandas as pd
from sklearn.naive_bayes import GaussianNB


def main():
    data_dir = os.environ["DATA_DIR"]
    train = pd.read_csv(os.path.join(data_dir, "train.csv"))
    test = pd.read_csv(os.path.join(data_dir, "test.csv"))
    features = [c for c in train.columns if c not in ("id", "species")]
    model = GaussianNB()
    model.fit(train[features], train["species"])
    proba = model.predict_proba(test[features])
    out = pd.DataFrame(proba, columns=model.classes_)
    out.insert(0, "id", test["id"].to_numpy())
    out.to_csv(os.environ["SUBMISSION_PATH"], index=False)


if __name__ == "__main__":
    main()
